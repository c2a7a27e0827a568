"""Waiting is not stuck: with the fleet's DRS budget full, a job whose message waits on the queue past the stuck
threshold is waiting for a budget place, and a job whose message is delayed (a throttle's Retry-After) is waiting
out the delay: neither is a doctor finding, counted stuck by the probe, or re-sent by `doctor --apply` or
`job_requeue_stuck`. A job with nothing queued still is, on the real local SQS and PostgreSQL."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from jobs import probe
from jobs.services import doctor
from jobs.services import producer as producer_service
from markets.generation import jobtype
from tests.jobs.conftest import leased, plant, run, waiting

pytestmark = pytest.mark.django_db

GEN = jobtype.MARKET_GENERATION_JOB_TYPE
BATCH = {"prompts": [{"prompt": "best running shoes", "category": "x"}], "summary": {"verdict": "ship"}}


@pytest.fixture(autouse=True)
def a_worker_is_alive(workers_alive):
    return workers_alive


@pytest.fixture
def budget_full(settings):
    """DRS_MAX_IN_FLIGHT 2, both places held by running generations (live leases, active a minute ago)."""
    settings.DRS_MAX_IN_FLIGHT = 2
    return [
        leased(job_type=GEN, expires_in=timedelta(minutes=10), quiet=timedelta(minutes=1), phase="generating")
        for _ in range(2)
    ]


def waiting_on_the_queue(quiet=timedelta(hours=2)):
    """A job waiting for a budget place past the stuck threshold: its message on the queue, unreceived."""
    job = waiting(job_type=GEN, quiet=quiet)
    producer_service._send(job.id, GEN)
    return job


def queued_count(queues) -> int:
    attributes = queues.sqs.client().get_queue_attributes(
        QueueUrl=queues.url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesDelayed"])


def test_a_job_waiting_for_a_full_budget_is_no_finding_not_stuck_and_not_resent_while_one_never_sent_is(
    queues, budget_full
):
    assert timedelta(hours=2).total_seconds() > settings.JOB_STUCK_AFTER_SECONDS
    in_line = waiting_on_the_queue()
    never_sent = plant(
        job_type=GEN,
        created_at=timezone.now() - timedelta(minutes=5),
        updated_at=timezone.now() - timedelta(minutes=5),
        message_sent_at=None,
    )

    diagnosis = doctor.doctor_run(apply=True, actor="test")

    assert [(f.kind, f.subject, f.done) for f in diagnosis.findings] == [
        (doctor.WAITING_WITHOUT_MESSAGE, str(never_sent.id), True)
    ]
    assert "DRS in flight 2 of DRS_MAX_IN_FLIGHT 2; 1 waiting for a DRS budget place" in diagnosis.notes[1]
    sent_at = in_line.message_sent_at
    in_line.refresh_from_db()
    assert in_line.message_sent_at == sent_at  # not re-sent
    assert queued_count(queues) == 2  # its one message, and the never-sent job's first
    gauges = probe.run_probe()
    # The never-sent job, sent by --apply, now waits in line too.
    assert {k: gauges[k] for k in ("StuckInProgressJobs", "DrsInFlight", "DrsMaxInFlight", "JobsWaitingForBudget")} == {
        "StuckInProgressJobs": 0,
        "DrsInFlight": 2,
        "DrsMaxInFlight": 2,
        "JobsWaitingForBudget": 2,
    }
    assert gauges["OldestBudgetWaitSeconds"] >= 2 * 3600 - 5
    assert run("job_requeue_stuck", "--apply").code == 0
    in_line.refresh_from_db()
    assert in_line.message_sent_at == sent_at


def test_a_job_waiting_for_a_full_budget_with_nothing_on_the_queue_is_stuck(queues, budget_full):
    lost = waiting(job_type=GEN, quiet=timedelta(hours=2))  # its message sent, and gone: nothing queued

    assert probe.run_probe()["StuckInProgressJobs"] == 1
    diagnosis = doctor.doctor_run(apply=False, actor="test")
    assert [(f.kind, f.subject) for f in diagnosis.findings] == [(doctor.WAITING_WITHOUT_MESSAGE, str(lost.id))]


def test_a_job_waiting_out_a_throttle_after_its_batch_is_not_write_stalled(queues, settings):
    throttled = waiting(
        job_type=GEN,
        quiet=timedelta(seconds=settings.SEMRUSH_WRITE_BUDGET_SECONDS + 60),
        phase=jobtype.PHASE_GENERATED,
        checkpoints={"batch": BATCH, "batchSize": 1},
        runnable_at=timezone.now() + timedelta(seconds=30),  # Retry-After not yet over
    )

    diagnosis = doctor.doctor_run(apply=True, actor="test")

    assert diagnosis.findings == []
    assert "1 waiting for a delay (throttle or retry)" in diagnosis.notes[1]
    sent_at = throttled.message_sent_at
    throttled.refresh_from_db()
    assert throttled.message_sent_at == sent_at


def test_a_full_budget_where_nothing_ended_for_a_delivery_budget_is_the_alarm(queues, budget_full):
    assert probe.run_probe()["DrsBudgetStalled"] == 1
    plant(
        job_type=GEN,
        status="COMPLETED",
        ended_at=timezone.now() - timedelta(seconds=settings.JOB_TASK_TIME_LIMIT_SECONDS / 2),
    )
    assert probe.run_probe()["DrsBudgetStalled"] == 0
