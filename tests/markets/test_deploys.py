"""A deploy (SIGTERM, warm shutdown) with a real worker process on the local SQS and PostgreSQL: the
stopping worker receives no new message, its running delivery finishes, and it exits 0."""

import base64
import os
import signal
import threading
import time
import uuid

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings as django_settings

from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from sandbox.semrush import state as semrush
from serenity.celery import app
from tests.markets.generation.test_handler import start_job
from tests.markets.test_worker_faults import wait_for_phase, worker_process
from tests.waits import wait_terminal, wait_until

pytestmark = pytest.mark.worker


@pytest.mark.parametrize("after", [0.0, 0.5, 1.5, 3.0])
def test_a_worker_in_warm_shutdown_receives_no_new_message(world, async_on, queues, after):
    """celery/celery#8875, celery/kombu#1835: a stopping worker went on receiving, and a message it received
    then was neither run nor released, so it waited a whole visibility timeout and its receive counted toward
    the DLQ's limit. The message sent after the SIGTERM must still be unreceived once the worker is gone."""
    drs_controls.set_latency(6000, remaining=1)
    job, _ = start_job(world)
    # Long polls, so a receive is in flight whenever the signal lands; a grace above the DRS call, so the
    # running delivery finishes instead of being handed back.
    stopping = worker_process({"WORKER_STOP_GRACE_SECONDS": 30, "SQS_WAIT_TIME_SECONDS": 2})
    try:
        wait_for_phase(job, "generating", timeout=30)
        os.kill(stopping.pid, signal.SIGTERM)
        time.sleep(after)  # at several points of the warm shutdown, and of a long poll
        late = str(uuid.uuid4())
        app.send_task("jobs.run", kwargs={"jobId": late, "type": "x"}, queue=django_settings.MARKET_JOBS_QUEUE)
        assert stopping.wait(timeout=60) == 0
    finally:
        if stopping.poll() is None:
            stopping.kill()
            stopping.wait()

    job = wait_terminal(job, timeout=5)
    assert job.status == "COMPLETED", job.error  # the running delivery finished
    assert job.attempts == 1
    # The late message is visible at once and was received by nobody before this receive.
    messages = receive_visible(queues)
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in messages] == ["1"]
    assert late in base64.b64decode(messages[0]["Body"]).decode()


@pytest.mark.parametrize("after", [0.3, 1.5])
def test_an_idle_worker_stopping_during_a_long_poll_releases_what_it_brings_unclaimed(
    world, async_on, queues, long_polls, after
):
    """An idle worker stops on SIGTERM while a long poll is in flight. SQS hands that poll a message sent in
    its remaining seconds even though the worker is going: the stopping worker starts no other poll, waits for
    that one's answer and makes what it brought visible again at once, unrun (jobs/worker/last_receives.py). So
    the job sent after the signal is never claimed by the stopping worker (no DRS call it would have to hand back)
    and its message is visible now, not after a visibility timeout."""
    from django.db import connection

    stopping = worker_process({"SQS_WAIT_TIME_SECONDS": 5})
    try:
        wait_consuming(stopping)
        wait_until(long_polls, timeout=30, what="a long poll in flight")
        os.kill(stopping.pid, signal.SIGTERM)
        time.sleep(after)
        job, _ = start_job(world)
        assert stopping.wait(timeout=60) == 0
    finally:
        if stopping.poll() is None:
            stopping.kill()
            stopping.wait()
    connection.close()
    time.sleep(6)  # past the poll's wait: an abandoned poll would have taken the message by now

    job.refresh_from_db()
    assert (job.status, job.attempts, job.lease_token) == ("IN_PROGRESS", 0, None)
    assert not job.events.filter(kind="lease_claimed").exists()
    assert drs.call_count() == 0
    # Visible at once: received by nobody (1 is this receive), or by the stopping worker's last poll and released.
    messages = receive_visible(queues)
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in messages] in (["1"], ["2"])
    assert str(job.id) in base64.b64decode(messages[0]["Body"]).decode()


def test_a_sigterm_during_a_drs_call_shorter_than_the_drain_completes_the_job_with_one_drs_call(
    world, async_on, queues
):
    """A deploy stops a worker while its DRS call (an LLM generation, paid per call) runs, past the stop grace but
    shorter than the drain: the stopping worker lets the call finish, persists the batch and hands the job back;
    the next worker writes and publishes without calling DRS again, and the stop spends no attempt."""
    drs_controls.set_latency(6000, remaining=1)
    job, market = start_job(world)
    stopping = worker_process({"WORKER_STOP_GRACE_SECONDS": 1, "WORKER_STOP_DRAIN_SECONDS": 30})
    try:
        wait_for_phase(job, "generating", timeout=30)
        wait_until(lambda: drs.call_count() == 1, timeout=30, what="the DRS call in flight")
        signalled = time.monotonic()
        os.kill(stopping.pid, signal.SIGTERM)
        assert stopping.wait(timeout=60) == 0
        stop_seconds = time.monotonic() - signalled
        job.refresh_from_db()
        # The stopping worker waited past its grace (1 s) for the call, kept its batch and handed the job back.
        assert job.checkpoints.get("batch") is not None and job.lease_token is None
        with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"):
            job = wait_terminal(job, timeout=django_settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS / 3)
    finally:
        if stopping.poll() is None:
            stopping.kill()
            stopping.wait()

    assert job.status == "COMPLETED", job.error
    assert drs.call_count() == 1
    assert job.attempts == 1  # the stop gave its attempt back; the second delivery counted one
    kinds = list(job.events.order_by("at", "id").values_list("kind", "detail"))
    released = kinds.index(("lease_released", "worker stopping"))
    assert ("checkpoint", "generated") in kinds[:released]
    assert [k for k, _ in kinds[released:]].count("lease_claimed") == 1
    assert len(semrush.prompts(market.semrush_project_id)) == 50
    print(f"drain: SIGTERM to exit {stop_seconds:.1f} s with a DRS call of 6 s in flight")


def receive_visible(queues) -> list[dict]:
    """The messages visible on the job queue now, with how many times SQS has handed each out."""
    return (
        queues.sqs.client()
        .receive_message(
            QueueUrl=queues.url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"], VisibilityTimeout=5
        )
        .get("Messages", [])
    )


def wait_consuming(process) -> None:
    """Until the worker process wrote its heartbeat: its consumer loop turns."""
    from jobs.models import WorkerHeartbeat

    wait_until(lambda: WorkerHeartbeat.objects.filter(worker__endswith=f":{process.pid}").exists(), timeout=30)


@pytest.fixture
def long_polls(monkeypatch):
    """How many long polls of the job queue the local SQS is holding open now, as SQS itself sees them: the moto
    server runs in this process, so its backend's receive is wrapped to count the receives still waiting."""
    from moto.sqs.models import SQSBackend

    receive, lock, waiting = SQSBackend.receive_message, threading.Lock(), [0]

    def counted(self, queue_name, count, wait_seconds_timeout, *args, **kwargs):
        long = queue_name == django_settings.MARKET_JOBS_QUEUE and bool(wait_seconds_timeout)
        if long:
            with lock:
                waiting[0] += 1
        try:
            return receive(self, queue_name, count, wait_seconds_timeout, *args, **kwargs)
        finally:
            if long:
                with lock:
                    waiting[0] -= 1

    monkeypatch.setattr(SQSBackend, "receive_message", counted)
    return lambda: waiting[0]
