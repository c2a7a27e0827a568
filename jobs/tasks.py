"""Celery tasks: thin interfaces to the job services. Messages carry ids, never objects or tokens."""

import logging
import socket
import threading
from typing import Any

from celery import Task, shared_task
from django.conf import settings

from jobs import probe
from jobs.clients import sqs
from jobs.exceptions import DeliveryNotStarted
from jobs.outcomes import record_outcome
from jobs.services import jobs_purge_expired, jobs_sweep_unsent
from jobs.services.runner import job_run
from serenity import tracing

log = logging.getLogger(__name__)


@shared_task(name="jobs.run", ignore_result=True, bind=True)
def run_job_task(self: "Task[Any, str]", jobId: str, type: str | None = None) -> str:  # the message's own names
    """Run one delivery of a job message `{jobId, type}`. A delivery the database failed before its claim
    hands its message back at once (visibility 0) and raises, so the message is not acked: the next receive
    runs it, not one a whole visibility timeout later."""
    worker = f"{socket.gethostname()}:{threading.get_ident()}"
    try:
        outcome = job_run(jobId, type, worker=worker, final_receive=final_receive(self.request))
    except DeliveryNotStarted:
        release_message(self.request)
        raise
    record_outcome(outcome, job_id=jobId)
    tracing.set_attributes(**{"job.outcome": str(outcome)})
    return str(outcome)


def receive_count(request: Any) -> int:
    """How many times SQS has delivered this delivery's message (ApproximateReceiveCount, which kombu always
    asks for); 0 when unknown (not SQS)."""
    properties = getattr(request, "properties", None) or {}
    message = (properties.get("delivery_info") or getattr(request, "delivery_info", None) or {}).get("sqs_message")
    try:
        return int(((message or {}).get("Attributes") or {}).get("ApproximateReceiveCount", 0))
    except (TypeError, ValueError):
        return 0


def final_receive(request: Any) -> bool:
    """The message's last receive before SQS moves it to the DLQ (MARKET_JOBS_MAX_RECEIVE_COUNT): the job must end
    on its row now (parked), since a crash of this delivery would leave it IN_PROGRESS with its message dead."""
    return receive_count(request) >= int(settings.MARKET_JOBS_MAX_RECEIVE_COUNT)


def release_message(request: Any) -> bool:
    """Make the SQS message of the delivery `request` visible again at once. True when SQS took it."""
    properties = getattr(request, "properties", None) or {}
    receipt = properties.get("delivery_tag")
    queue_url = (properties.get("delivery_info") or {}).get("sqs_queue")
    if not receipt or not queue_url:
        return False
    try:
        sqs.change_visibility(queue_url, receipt, 0)
    except Exception as exc:  # the message then comes back after its visibility timeout, as before
        log.warning("message not handed back", extra={"error": type(exc).__name__})
        return False
    log.warning("delivery failed before its claim; message handed back at once")
    return True


@shared_task(name="jobs.sweep_unsent", ignore_result=True)
def sweep_unsent_task() -> int:
    return len(jobs_sweep_unsent())


@shared_task(name="jobs.probe", ignore_result=True)
def probe_task() -> None:
    probe.run_probe()


@shared_task(name="jobs.purge_expired", ignore_result=True)
def purge_expired_task() -> int:
    """Daily: delete job records past their expiry, with their grants (the same loop as the runbook)."""
    purged = sum(bool(item.done) for item in jobs_purge_expired(apply=True))
    log.info("expired job records purged", extra={"purged": purged})
    return purged
