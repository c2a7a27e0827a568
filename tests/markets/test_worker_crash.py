"""A worker SIGKILLed at every phase boundary: the message comes back after the visibility timeout, the
lease has expired, and the job completes with DRS called once and no prompt written twice (SPEC §5)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings as django_settings

from sandbox.drs import state as drs
from sandbox.semrush import state as semrush
from serenity.celery import app
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_terminal, wait_until

pytestmark = pytest.mark.worker

REPO = Path(__file__).resolve().parents[2]
# Short, still nested, timeouts (visibility > lease > task limit > DRS + writes): a crashed delivery
# comes back after 10 s instead of 16 minutes.
TIMEOUTS = {
    "QUEUE_VISIBILITY_TIMEOUT_SECONDS": 10,
    "JOB_LEASE_TTL_SECONDS": 9,
    "JOB_TASK_TIME_LIMIT_SECONDS": 8,
    "DRS_TIMEOUT_SECONDS": 3,
    "SEMRUSH_WRITE_BUDGET_SECONDS": 4,
}

# Shorter still, for a worker that dies right after its claim: its message is back, and its lease expired,
# within 4 s.
KILLED_FAST = {
    "QUEUE_VISIBILITY_TIMEOUT_SECONDS": 4,
    "JOB_LEASE_TTL_SECONDS": 3,
    "JOB_TASK_TIME_LIMIT_SECONDS": 2,
    "DRS_TIMEOUT_SECONDS": 1,
    "SEMRUSH_WRITE_BUDGET_SECONDS": 0,
}


@pytest.fixture
def short_timeouts(settings, queues):
    for name, value in TIMEOUTS.items():
        setattr(settings, name, value)
    client = queues.sqs.client()
    client.set_queue_attributes(QueueUrl=queues.url, Attributes={"VisibilityTimeout": "10"})
    yield
    client.set_queue_attributes(QueueUrl=queues.url, Attributes={"VisibilityTimeout": "960"})


def crash_worker(point: str, timeouts: dict = TIMEOUTS) -> int:
    db = django_settings.DATABASES["default"]
    env = {
        **os.environ,
        **{k: str(v) for k, v in timeouts.items()},
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
    }
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "crashing_worker.py"), point],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("point", "phase_at_crash", "drs_calls_at_crash", "prompts_at_crash"),
    [
        ("after_claim", "queued", 0, 0),
        ("after_drs_persisted", "generated", 1, 0),
        ("after_write_before_checkpoint", "writing", 1, 50),
        ("after_checkpoint_before_publish", "written", 1, 50),
    ],
)
def test_a_worker_killed_at_a_phase_boundary_is_recovered_without_duplicates(
    world, async_on, short_timeouts, point, phase_at_crash, drs_calls_at_crash, prompts_at_crash
):
    job, market = start_job(world)
    assert crash_worker(point) == -9  # SIGKILL

    job.refresh_from_db()
    assert job.status == "IN_PROGRESS" and job.phase == phase_at_crash
    assert job.lease_token is not None and job.attempts == 1  # the dead worker's lease is left behind
    assert drs.call_count() == drs_calls_at_crash
    assert len(semrush.prompts(market.semrush_project_id)) == prompts_at_crash

    with start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING", shutdown_timeout=30
    ):
        job = wait_terminal(job, timeout=45)

    assert job.status == "COMPLETED", job.error
    assert job.attempts == 2 and job.lease_epoch == 2
    assert drs.call_count() == 1
    texts = [p["text"] for p in semrush.prompts(market.semrush_project_id)]
    assert len(texts) == len(set(texts)) == job.result["promptCount"] == 50
    assert semrush.project(market.semrush_project_id)["published"] is True


def test_a_message_that_keeps_killing_workers_lands_in_the_dlq(world, async_on, settings, queues):
    import json

    job, _market = start_job(world)
    client = queues.sqs.client()
    dlq_arn = client.get_queue_attributes(QueueUrl=queues.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    client.set_queue_attributes(
        QueueUrl=queues.url,
        Attributes={
            "VisibilityTimeout": "4",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"}),
        },
    )
    for _ in range(2):  # each worker receives the message, claims the job and dies
        assert crash_worker("after_claim", timeouts=KILLED_FAST) == -9

    def dead_lettered():
        # Once the second receive's visibility runs out, the next receive moves the message to the DLQ.
        assert queues.drain() == []
        return queues.drain(queues.dlq_url)

    (dead,) = wait_until(dead_lettered, timeout=30, what="the message in the DLQ")
    assert dead["kwargs"] == {"jobId": str(job.id), "type": "generateSemrushMarket"}
    job.refresh_from_db()
    assert job.status == "IN_PROGRESS" and job.attempts == 2  # left for the operator's lease-aware redrive
    assert drs.call_count() == 0


def test_a_job_whose_deliveries_are_killed_twice_is_parked_shown_and_run_again_only_when_named(
    world, async_on, settings, queues
):
    """Two workers SIGKILLed on the job's delivery: the next worker parks it instead of running it (so what
    kills workers kills no third), deletes its message, and the doctor says so with exit 1. Named by an
    operator, it runs again and completes."""
    from io import StringIO

    from django.core.management import call_command

    usual = {name: getattr(settings, name) for name in KILLED_FAST}
    for name, value in KILLED_FAST.items():
        setattr(settings, name, value)
    client = queues.sqs.client()
    client.set_queue_attributes(QueueUrl=queues.url, Attributes={"VisibilityTimeout": "4"})
    try:
        job, _market = start_job(world)
        for _ in range(2):  # each receives the message (again, once its visibility ran out), claims and dies
            assert crash_worker("after_claim", timeouts=KILLED_FAST) == -9
        job.refresh_from_db()
        assert job.lost_deliveries == 1 and job.lease_token is not None  # the second dead lease not yet counted

        with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"):
            job = wait_parked(job, timeout=30)
        assert job.status == "IN_PROGRESS" and job.lease_token is None and job.attempts == 2
        assert drs.call_count() == 0  # the parking delivery ran nothing
        assert job.events.filter(kind="parked").count() == 1
        assert queues.drain() == [] and queues.drain(queues.dlq_url) == []  # its message is gone, not dead

        out = StringIO()
        with pytest.raises(SystemExit) as exited:
            call_command("doctor", stdout=out)
        assert exited.value.code == 1
        assert "crash_loop" in out.getvalue() and "parked" in out.getvalue()

        requeued = StringIO()
        # as the doctor says
        call_command("job_requeue_stuck", "--job", str(job.id), "--older-than", "0s", "--apply", stdout=requeued)
        job.refresh_from_db()
        assert job.parked_at is None, requeued.getvalue()
        for name, value in usual.items():  # the cause is fixed: the usual timeouts again
            setattr(settings, name, value)
        with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"):
            job = wait_terminal(job, timeout=45)
        assert job.status == "COMPLETED", job.error
        assert drs.call_count() == 1
    finally:
        client.set_queue_attributes(QueueUrl=queues.url, Attributes={"VisibilityTimeout": "960"})


def wait_parked(job, timeout: float):
    def parked():
        job.refresh_from_db()
        return job if job.parked_at is not None else None

    return wait_until(parked, timeout=timeout)
