"""A worker asks SQS for no more job messages than the fleet's DRS budget has places for (jobs/worker/intake.py):
at the budget its messages stay in the queue unreceived, instead of being received, held back and sent again."""

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import services as job_services
from jobs.leases import in_flight_free
from jobs.models import AsyncJob
from jobs.worker import intake
from jobs.worker.heartbeats import heartbeat_write
from tests.jobs.factories import AsyncJobFactory
from tests.jobs.test_drs_budget import running


def test_the_free_places_are_the_budget_less_the_live_leases(db, settings):
    settings.DRS_MAX_IN_FLIGHT = 3
    assert in_flight_free() == 3
    running(2)
    AsyncJobFactory(lease_token=uuid.uuid4(), attempts=1, lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert in_flight_free() == 1
    running(4)
    assert in_flight_free() == 0  # over the budget is no place, never a negative one
    settings.DRS_MAX_IN_FLIGHT = 0
    assert in_flight_free() is None


def read_on_its_own_thread(reading: intake.BudgetReading) -> None:
    """As the worker reads: on a thread of its own, with its own connection (closed after each reading)."""
    thread = threading.Thread(target=reading.read)
    thread.start()
    thread.join(30)


def test_a_reading_limits_what_a_receive_asks_for_until_the_next_one(transactional_db, settings):
    settings.DRS_MAX_IN_FLIGHT = 5
    reading = intake.BudgetReading()
    assert reading.allowance() is None  # never read: no limit
    running(3)
    read_on_its_own_thread(reading)
    assert reading.allowance() == 2
    reading.took(3)
    assert reading.allowance() == 0
    read_on_its_own_thread(reading)
    assert reading.allowance() == 2
    # Three live workers on the job queue share the places: this one asks for its third, rounded up.
    for worker in ("w1:1", "w2:1", "w3:1"):
        heartbeat_write(worker, [settings.MARKET_JOBS_QUEUE], started_at=timezone.now())
    settings.DRS_MAX_IN_FLIGHT = 10
    read_on_its_own_thread(reading)
    assert reading.allowance() == 3  # ceil(7 / 3)
    settings.DRS_MAX_IN_FLIGHT = 0
    read_on_its_own_thread(reading)
    assert reading.allowance() is None  # the budget off: no limit


@pytest.mark.worker
def test_at_the_budget_the_worker_leaves_job_messages_unreceived_and_runs_them_once_a_place_frees(
    celery_worker, handler, queues, settings
):
    settings.DRS_MAX_IN_FLIGHT = 1
    [holder] = running(1)
    deadline = time.monotonic() + 60
    while intake._reading is None or intake._reading.allowance() != 0:  # the worker has read the full budget
        assert time.monotonic() < deadline, "the worker never read the budget full"
        time.sleep(0.05)
    jobs = [AsyncJobFactory(organization_id=uuid.uuid4()) for _ in range(3)]
    for job in jobs:
        assert job_services.job_publish(job.id, job.job_type)
    withheld_before = intake.withheld

    def sent() -> int:
        return sum(job.events.filter(kind="message_sent").count() for job in jobs)

    # The worker's receive loop looks again and again and each time asks for nothing (or, without the limit,
    # receives the messages, holds them back and sends them again).
    while intake.withheld < withheld_before + 20 and sent() == 3:
        assert time.monotonic() < deadline, "the worker neither withheld its receives nor held a job back"
        time.sleep(0.1)
    counts = queues.sqs.approximate_counts(queues.url)
    assert (counts["Visible"], counts["NotVisible"]) == (3, 0)  # never received: no receive towards the DLQ
    assert handler.calls == []
    assert sent() == 3  # none held back and sent again

    AsyncJob.objects.filter(id=holder.id).update(status="COMPLETED", lease_token=None, ended_at=timezone.now())
    while AsyncJob.objects.filter(id__in=[job.id for job in jobs], status="IN_PROGRESS").exists():
        assert time.monotonic() < deadline + 60, "the jobs did not run once a place was free"
        time.sleep(0.2)
    assert sorted(handler.calls) == sorted(job.id for job in jobs)
    assert list(
        AsyncJob.objects.filter(id__in=[job.id for job in jobs]).values_list("status", "attempts").distinct()
    ) == [("COMPLETED", 1)]
