"""Fixtures for the operator tests: jobs planted in any state, real Celery-shaped messages in the real
DLQ, command runs with captured output, and the IMS invalidation seam recorded."""

import io
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from jobs import handlers
from jobs.clients import sqs
from jobs.models import AsyncJob
from jobs.services import producer
from tests.jobs.factories import AsyncJobFactory
from tokens import services as grants
from tokens.pairs import get_pair
from tokens.types import PromiseToken

KNOWN_TOKEN = "promise-VALUE-that-must-never-show-0123456789"


def ago(**kwargs):
    return timezone.now() - timedelta(**kwargs)


def plant(**fields) -> AsyncJob:
    """A job row in exactly the given state (history-free unless a test adds events)."""
    return AsyncJobFactory(**fields)


def waiting(*, quiet=timedelta(hours=3), **fields) -> AsyncJob:
    """IN_PROGRESS, no lease, its message sent and nothing since for `quiet`."""
    at = timezone.now() - quiet
    return plant(**{"created_at": at, "updated_at": at, "message_sent_at": at, **fields})


def leased(*, expires_in: timedelta, **fields) -> AsyncJob:
    """IN_PROGRESS under a lease expiring in `expires_in` (negative: already expired)."""
    return waiting(
        **{"lease_token": uuid.uuid4(), "lease_expires_at": timezone.now() + expires_in, "attempts": 1, **fields}
    )


def store_grant(job, value: str = KNOWN_TOKEN):
    """A real encrypted grant for `job` (a job or a bare job id) holding the token `value`."""
    token = PromiseToken(promise_token=value, token_type="promise_token", expires_in=3600)
    return grants.grant_store(job_id=getattr(job, "id", job), pair=get_pair("semrush"), token=token)


def celery_body(job_id, job_type: str = "testEcho") -> str:
    """The exact body the producer puts on SQS for a job: sent to the main queue, then taken back."""
    producer._send(job_id, job_type)
    for message in sqs.receive(settings.MARKET_JOBS_QUEUE_URL, max_messages=10, visibility=60):
        sqs.delete(settings.MARKET_JOBS_QUEUE_URL, message["ReceiptHandle"])
        return message["Body"]
    raise AssertionError("the job message did not reach the queue")


def to_dlq(job_id, job_type: str = "testEcho") -> str:
    """Put a real job message in the real DLQ; returns its SQS message id."""
    return sqs.send_raw(settings.MARKET_JOBS_DLQ_URL, celery_body(job_id, job_type))


def dlq_job_ids() -> list[str | None]:
    """Take every message out of the DLQ: the job id of each (None for a body that is not a job message)."""
    from jobs.messages import decode_job_message

    out = []
    while batch := sqs.receive(settings.MARKET_JOBS_DLQ_URL, max_messages=10, visibility=60):
        for message in batch:
            decoded = decode_job_message(message["Body"])
            out.append(decoded[0] if decoded else None)
            sqs.delete(settings.MARKET_JOBS_DLQ_URL, message["ReceiptHandle"])
    return out


class Output(list):
    """A command's output lines, and its exit code in `.code`."""

    code: int = 0


def run(command: str, *args) -> Output:
    """Run a management command as a shell would: its output lines (stdout, then stderr), and the exit code
    it ended with (0 unless it exited otherwise)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command(command, *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    output = Output([*out.getvalue().splitlines(), *err.getvalue().splitlines()])
    output.code = code
    return output


def lines_about(lines, job) -> list[str]:
    return [line for line in lines if line.startswith(str(job.id))]


def snapshot() -> list[tuple]:
    """Every job row's mutable state, to prove a dry run changed nothing."""
    return list(
        AsyncJob.objects.order_by("id").values_list(
            "id", "status", "error_code", "lease_token", "lease_expires_at", "updated_at", "message_sent_at"
        )
    )


@pytest.fixture
def ims_invalidations(monkeypatch):
    """The IMS invalidation seam: records each call `(pair name, token value)` instead of going out."""
    from tokens.clients import ims

    calls = []
    monkeypatch.setattr(ims, "invalidate", lambda *, promise, pair: calls.append((pair.name, promise.promise_token)))
    return calls


def scheduled_task_to_dlq(task) -> str:
    """Put a scheduled task's message, exactly as Celery sends it, in the real DLQ (as if it had dead-lettered
    from the queue it is routed to); returns its SQS message id."""
    from jobs.messages import task_name

    task.apply_async()
    for url in (settings.MAINTENANCE_QUEUE_URL, settings.MARKET_JOBS_QUEUE_URL):
        for message in sqs.receive(url, max_messages=10, visibility=60):
            if task_name(message["Body"]) == task.name:
                sqs.delete(url, message["ReceiptHandle"])
                return sqs.send_raw(settings.MARKET_JOBS_DLQ_URL, message["Body"])
    raise AssertionError(f"the {task.name} message reached no queue")


class Handler:
    """A test job handler whose behaviour each test sets; records every call."""

    def __init__(self):
        self.calls = []
        self.behaviour = lambda run: {"ok": True}

    def run(self, run):
        self.calls.append(run.job.id)
        return self.behaviour(run)


@pytest.fixture
def handler():
    h = Handler()
    handlers.register("testEcho", h)
    yield h
    handlers.unregister("testEcho")
