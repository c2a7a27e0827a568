"""Celery tasks: thin interfaces to the job services. Messages carry ids, never objects or tokens."""

import logging
import socket
import threading

from celery import shared_task

from jobs import probe
from jobs.outcomes import record_outcome
from jobs.services import jobs_purge_expired, jobs_sweep_unsent
from jobs.services.runner import job_run
from serenity import tracing

log = logging.getLogger(__name__)


@shared_task(name="jobs.run", ignore_result=True)
def run_job_task(jobId: str, type: str | None = None) -> str:  # the message's own names
    """Run one delivery of a job message `{jobId, type}`."""
    worker = f"{socket.gethostname()}:{threading.get_ident()}"
    outcome = job_run(jobId, type, worker=worker)
    record_outcome(outcome, job_id=jobId)
    tracing.set_attributes(**{"job.outcome": str(outcome)})
    return str(outcome)


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
