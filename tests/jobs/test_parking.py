"""A crash-looping job is parked: the delivery that finds it crash-looping runs nothing, deletes its message, and
the job waits, shown as parked, until an operator names it (re-sent) or marks it failed (SPEC §13 Healing)."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs import selectors
from jobs.display import deliveries_line
from jobs.models import JobStatus
from jobs.services import operator, runner
from jobs.tasks import final_receive
from tests.jobs.factories import AsyncJobFactory


def _twice_killed(**fields):
    """A job whose first delivery died holding the lease (taken over) and whose second died too (lease expired)."""
    past = timezone.now() - timedelta(seconds=5)
    return AsyncJobFactory(
        attempts=2,
        lost_deliveries=1,
        lease_token="11111111-1111-1111-1111-111111111111",
        lease_expires_at=past,
        message_sent_at=past,
        **fields,
    )


def test_a_delivery_of_a_twice_killed_job_parks_it_and_runs_nothing(db, handler):
    job = _twice_killed()
    outcome = runner.job_run(str(job.id), job.job_type, worker="w")
    assert outcome == runner.PARKED
    assert handler.calls == []
    job.refresh_from_db()
    assert job.status == JobStatus.IN_PROGRESS
    assert job.parked_at is not None
    assert job.lease_token is None and job.attempts == 2 and job.lost_deliveries == 2
    assert list(job.events.values_list("kind", flat=True)) == ["parked"]
    assert "parked" in deliveries_line(selectors.deliveries(job), in_progress=True)
    # Every later delivery of it (a duplicate, a redelivered copy) runs nothing either.
    assert runner.job_run(str(job.id), job.job_type, worker="w") == runner.PARKED
    assert handler.calls == []


def test_a_job_with_one_lost_delivery_still_runs(db, handler):
    job = AsyncJobFactory(attempts=1, lost_deliveries=1)
    runner.job_run(str(job.id), job.job_type, worker="w")
    assert handler.calls == [job.id]


def test_the_last_receive_before_the_dlq_parks_the_job(db, handler, settings):
    job = AsyncJobFactory()
    request = type("R", (), {"properties": {"delivery_info": {"sqs_message": {"Attributes": {}}}}})()
    request.properties["delivery_info"]["sqs_message"]["Attributes"]["ApproximateReceiveCount"] = str(
        settings.MARKET_JOBS_MAX_RECEIVE_COUNT
    )
    assert final_receive(request) is True
    assert runner.job_run(str(job.id), job.job_type, worker="w", final_receive=final_receive(request)) == runner.PARKED
    assert handler.calls == []
    job.refresh_from_db()
    assert job.parked_at is not None and job.status == JobStatus.IN_PROGRESS


def test_the_doctor_reports_a_parked_job_and_exits_1(db, handler, queues, workers_alive):
    job = _twice_killed()
    runner.job_run(str(job.id), job.job_type, worker="w")
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("doctor", stdout=out)
    assert exited.value.code == 1
    assert "crash_loop" in out.getvalue()
    assert "parked" in out.getvalue()
    assert "No inconsistencies" not in out.getvalue()


def test_named_it_is_unparked_and_runs_again(db, handler, queues):
    job = _twice_killed()
    runner.job_run(str(job.id), job.job_type, worker="w")
    assert operator.job_requeue(job.id, actor="op") is True
    job.refresh_from_db()
    assert job.parked_at is None and job.lost_deliveries == 0
    runner.job_run(str(job.id), job.job_type, worker="w")
    assert handler.calls == [job.id]


def test_marked_failed_a_parked_job_ends_failed(db, handler):
    job = _twice_killed()
    runner.job_run(str(job.id), job.job_type, worker="w")
    assert operator.job_mark_failed(job.id, code="MARKED_FAILED", reason="kills workers", actor="op") is True
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.parked_at is None
