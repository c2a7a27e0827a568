"""A crash-looping job is parked: the delivery that finds it crash-looping runs nothing, deletes its message, and
the job waits, shown as parked, until an operator names it (re-sent) or marks it failed (SPEC §13 Healing)."""

import threading
from collections import Counter
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from jobs import selectors
from jobs.display import deliveries_line
from jobs.models import AsyncJob, JobStatus
from jobs.services import operator, runner
from jobs.tasks import final_receive
from tests.jobs.factories import AsyncJobFactory
from tests.waits import wait_until


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


def test_the_redrive_keeps_the_dlq_copy_of_a_job_parked_at_its_last_receive_unless_it_is_named(db):
    job = AsyncJobFactory(attempts=1, parked_at=timezone.now())
    assert operator.redrive_verdict(job) == (
        operator.KEEP,
        f"parked at its message's last receive before the DLQ: re-sent only when named with --job {job.id}, once "
        "the cause is fixed",
    )
    assert operator.redrive_verdict(job, named=True)[0] == operator.RESEND


def backends_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_a_delivery_that_loses_the_race_to_park_finds_the_job_parked_and_sends_nothing(
    transactional_db, handler, queues
):
    """Two deliveries of a crash-looping job on real threads and connections: both read it unparked, and both
    send their parking UPDATE while a third connection holds the job's row, so they race for it when it is let
    go. One parks the job; the other finds it parked: it runs nothing, and sends nothing either (a parked job
    is not waiting for a place, so no hold-back sends it again)."""
    job = _twice_killed()
    sent_before = job.message_sent_at
    row_held, let_go = threading.Event(), threading.Event()
    outcomes = []

    def hold_the_row():
        try:
            with transaction.atomic():
                AsyncJob.objects.select_for_update().get(id=job.id)
                row_held.set()
                let_go.wait(60)
        finally:
            connection.close()

    def deliver(worker):
        try:
            outcomes.append(runner.job_run(str(job.id), job.job_type, worker=worker))
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    assert row_held.wait(30)
    deliveries = [threading.Thread(target=deliver, args=(f"w{i}",)) for i in (1, 2)]
    [t.start() for t in deliveries]
    wait_until(lambda: backends_waiting_on_a_lock() == 2, what="both parking UPDATEs waiting on the row")
    let_go.set()
    [t.join(60) for t in [holder, *deliveries]]

    assert Counter(outcomes) == {runner.PARKED: 2}
    assert handler.calls == []
    job.refresh_from_db()
    assert (job.status, job.lease_token, job.attempts, job.lost_deliveries) == ("IN_PROGRESS", None, 2, 2)
    assert job.parked_at is not None and job.message_sent_at == sent_before
    assert list(job.events.values_list("kind", flat=True)) == ["parked"]
    assert queues.drain() == []
    assert queues.sqs.approximate_counts(queues.url)["Delayed"] == 0
