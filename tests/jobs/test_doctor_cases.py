"""The doctor's table of cases (docs/operations.md, "The doctor: the cases"), each with real Celery workers (in
this process, or separate processes SIGKILLed mid-job), the local SQS and PostgreSQL: {no worker, a dead
worker's lease, a message waiting, in flight, in the DLQ, just re-sent}. Each test asserts what the doctor
reports, what --apply sends (or never sends), and the exit code; none asserts how long anything took.

Workers here beat every second (WORKER_HEARTBEAT_SECONDS=1, so a worker counts as dead three seconds after its
last beat), and the doctor runs in this process with the same setting.
"""

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings as django_settings
from django.utils import timezone

from jobs import probe, selectors
from jobs.clients import sqs
from jobs.dlq import queue_counts, total
from jobs.models import AsyncJob
from jobs.services import doctor, producer
from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from serenity.celery import app
from tests.jobs.conftest import celery_body, run
from tests.markets.generation.test_handler import start_job
from tests.markets.test_worker_crash import KILLED_FAST, crash_worker
from tests.markets.test_worker_faults import wait_for_phase
from tests.waits import wait_terminal, wait_until

pytestmark = pytest.mark.worker

REPO = Path(__file__).resolve().parents[2]
MARKET_JOBS = django_settings.MARKET_JOBS_QUEUE
MAINTENANCE = django_settings.MAINTENANCE_QUEUE
# A worker process whose lease runs out within seconds (the timeouts still nest); its message stays in flight
# for the queue's own visibility timeout (960 s) unless a test shortens that on the queue.
SHORT_LEASE = {
    "QUEUE_VISIBILITY_TIMEOUT_SECONDS": 10,
    "JOB_LEASE_TTL_SECONDS": 9,
    "JOB_TASK_TIME_LIMIT_SECONDS": 8,
    "DRS_TIMEOUT_SECONDS": 3,
    "SEMRUSH_WRITE_BUDGET_SECONDS": 4,
}


@pytest.fixture(autouse=True)
def beating_every_second(settings):
    settings.WORKER_HEARTBEAT_SECONDS = 1


def kinds(output) -> dict[str, set[str]]:
    """`{kind: {subject, ...}}` from the doctor's output (notes and the summary left out)."""
    out: dict[str, set[str]] = {}
    for line in output:
        parts = line.split("  ")
        if line.startswith("note  ") or len(parts) < 3:
            continue
        out.setdefault(parts[1], set()).add(parts[0])
    return out


def line_of(output, kind: str) -> str:
    (line,) = [line for line in output if f"  {kind}  " in line]
    return line


def no_consumer_anywhere() -> dict[str, set[str]]:
    return {doctor.NO_CONSUMER: {MARKET_JOBS, MAINTENANCE}}


def messages_in_queue() -> int:
    """Every message the market-jobs queue holds (waiting, in flight, delayed), counted, never received."""
    return total(queue_counts("queue")["queue"])


@contextmanager
def live_worker(queues=(MARKET_JOBS, MAINTENANCE), concurrency=2):
    """A real worker in this process, consuming `queues`; yields once its heartbeat says it is alive."""
    with start_worker(
        app,
        pool="threads",
        concurrency=concurrency,
        perform_ping_check=False,
        loglevel="WARNING",
        shutdown_timeout=30,
        queues=list(queues),
    ) as worker:
        wait_until(lambda: selectors.workers_alive(queues[0]) == 1, timeout=30)
        yield worker


@contextmanager
def worker_process(**env):
    """A real worker process on both queues (tests/crashing_worker.py, crashing nowhere), beating every second;
    yields the process once its heartbeat says it is alive. Killed on the way out if still running."""
    db = django_settings.DATABASES["default"]
    env = {
        **os.environ,
        **{k: str(v) for k, v in env.items()},
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "WORKER_HEARTBEAT_SECONDS": "1",
        "TEST_WORKER_QUEUES": f"{MARKET_JOBS},{MAINTENANCE}",
    }
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "crashing_worker.py"), "never"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: selectors.workers_alive(MARKET_JOBS) >= 1, timeout=60)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def apply_while_a_worker_is_alive(job):
    """`doctor --apply` with a live worker, the job run to its end, then `doctor` again: the three results."""
    with live_worker():
        output = run("doctor", "--apply")
        job = wait_terminal(job, timeout=60)
        again = run("doctor")
    return output, job, again


def kill_mid_job(world, **env):
    """Start a job, let a worker process take it into its DRS call, SIGKILL that worker, and wait until its
    heartbeat says it is dead. Returns the job, with the dead worker's lease on it and its message in flight."""
    drs_controls.set_latency(60_000, remaining=1)  # the worker sits in the DRS call until it is killed
    job, _ = start_job(world)
    with worker_process(**env) as process:
        wait_for_phase(job, "generating", timeout=60)
        wait_until(lambda: drs.call_count() == 1, timeout=30)  # the call (and its latency) is taken: kill now
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    wait_until(lambda: selectors.workers_alive(MARKET_JOBS) == 0, timeout=30)
    job.refresh_from_db()
    return job


# --- Workers alive ----------------------------------------------------------------------------------------------


def test_a_job_a_live_worker_runs_is_clean(world, async_on):
    drs_controls.set_latency(3000, remaining=1)
    job, _ = start_job(world)
    with live_worker():
        wait_for_phase(job, "generating", timeout=30)
        output = run("doctor", "--apply")
        job = wait_terminal(job, timeout=60)

    assert [line for line in output if not line.startswith("note")] == ["No inconsistencies found."]
    assert output.code == 0
    assert job.status == "COMPLETED", job.error


def test_a_message_waiting_behind_a_busy_worker_is_clean(world, async_on):
    drs_controls.set_latency(4000, remaining=1)
    first, _ = start_job(world, market="DE", language="de")
    with live_worker(concurrency=1):
        wait_for_phase(first, "generating", timeout=30)
        second, _ = start_job(world, market="FR", language="fr")  # waits: the only thread is busy

        output = run("doctor", "--apply")

        assert messages_in_queue() == 2  # both messages are still somewhere on the queue: nothing was added
        wait_terminal(second, timeout=60)
    assert [line for line in output if not line.startswith("note")] == ["No inconsistencies found."]
    assert output.code == 0


def test_a_job_held_back_with_a_delayed_message_is_neither_stuck_nor_missing_a_consumer(world, async_on, queues):
    job, _ = start_job(world)
    queues.drain()
    producer.job_publish(job.id, job.job_type, delay=120)  # held back: no lease, a fresh delayed message
    with live_worker():
        output = run("doctor", "--apply")
        gauges = probe.run_probe()

    assert [line for line in output if not line.startswith("note")] == ["No inconsistencies found."]
    assert (
        "note  main queue ~0 waiting, 0 in flight, 1 delayed (counted, never received); DLQ ~0 waiting, 0 in "
        "flight, 0 read; maintenance queue ~0" in output
    )
    assert (gauges["StuckInProgressJobs"], gauges["JobMessagesWithoutConsumer"]) == (0, 0)
    assert messages_in_queue() == 1


def test_a_dead_workers_expired_lease_is_re_enqueued_once_a_worker_is_alive_and_the_job_completes(world, async_on):
    job = kill_mid_job(world, **SHORT_LEASE)  # its message stays in flight: the queue's visibility is 960 s
    wait_until(lambda: AsyncJob.objects.get(id=job.id).lease_state() == "expired", timeout=30)

    output, job, again = apply_while_a_worker_is_alive(job)

    assert kinds(output) == {doctor.LEASE_EXPIRED: {str(job.id)}}
    assert line_of(output, doctor.LEASE_EXPIRED).endswith("[done]") and output.code == 0
    assert job.status == "COMPLETED", job.error
    assert job.events.filter(kind="requeued").count() == 1
    assert [line for line in again if not line.startswith("note")] == ["No inconsistencies found."]


def test_a_job_with_no_message_anywhere_is_re_enqueued_and_the_next_run_is_clean(world, async_on, queues):
    job, _ = start_job(world)
    queues.drain()  # its message is lost
    quiet = timezone.now() - timedelta(hours=1)
    AsyncJob.objects.filter(id=job.id).update(updated_at=quiet, message_sent_at=quiet)

    output, job, again = apply_while_a_worker_is_alive(job)

    assert kinds(output) == {doctor.WAITING_WITHOUT_MESSAGE: {str(job.id)}}
    assert line_of(output, doctor.WAITING_WITHOUT_MESSAGE).endswith("[done]") and output.code == 0
    assert job.status == "COMPLETED", job.error
    assert [line for line in again if not line.startswith("note")] == ["No inconsistencies found."]
    assert again.code == 0


def test_a_dlq_copy_of_a_job_a_live_worker_runs_is_reported_and_left_alone(world, async_on, queues):
    drs_controls.set_latency(3000, remaining=1)
    job, _ = start_job(world)
    copy = celery_body(job.id, job.job_type)  # a copy of its message, taken before a worker can consume it
    queues.drain()
    producer.job_publish(job.id, job.job_type)
    with live_worker():
        wait_for_phase(job, "generating", timeout=30)
        sqs.send_raw(django_settings.MARKET_JOBS_DLQ_URL, copy)

        output = run("doctor", "--apply")

        wait_terminal(job, timeout=60)
    assert kinds(output) == {doctor.DLQ_COPY_OF_RUNNING_JOB: {str(job.id)}}
    assert output.code == 1
    assert job.events.filter(kind__in=["requeued", "redriven"]).count() == 0


def test_a_maintenance_queue_no_worker_consumes_is_reported_and_counted(world, async_on, queues):
    from jobs.tasks import sweep_unsent_task

    sweep_unsent_task.apply_async()
    sweep_unsent_task.apply_async()
    with live_worker(queues=(MARKET_JOBS,)):
        output = run("doctor", "--apply")
        gauges = probe.run_probe()

    assert kinds(output) == {doctor.NO_CONSUMER: {MAINTENANCE}}
    assert "it holds ~2 waiting, 0 in flight, 0 delayed" in line_of(output, doctor.NO_CONSUMER)
    assert output.code == 1
    assert (gauges["WorkersAlive"], gauges["MaintenanceQueueDepth"]) == (1, 2)


# --- No worker alive --------------------------------------------------------------------------------------------


def test_a_message_just_sent_with_no_worker_alive_is_no_consumer_and_apply_piles_nothing_up(world, async_on):
    job, _ = start_job(world)

    first, second = run("doctor", "--apply"), run("doctor", "--apply")

    for output in (first, second):
        assert kinds(output) == no_consumer_anywhere()
        assert "it holds ~1 waiting, 0 in flight, 0 delayed; 1 job(s) IN_PROGRESS" in next(
            line for line in output if line.startswith(MARKET_JOBS)
        )
        assert output.code == 1
    assert messages_in_queue() == 1
    assert job.events.filter(kind="requeued").count() == 0


def test_every_worker_sigkilled_mid_job_reads_0_alive_and_the_first_doctor_run_reports_no_consumer(world, async_on):
    job = kill_mid_job(world)
    assert job.lease_state() == "held"  # the dead worker's lease: it looks exactly like a live one's

    gauges = probe.run_probe()
    output = run("doctor")

    assert (gauges["WorkersAlive"], gauges["JobMessagesWithoutConsumer"]) == (0, 1)
    assert kinds(output) == no_consumer_anywhere()
    line = next(line for line in output if line.startswith(MARKET_JOBS))
    assert "no live worker consumes it (last heartbeat" in line
    assert "it holds ~0 waiting, 1 in flight, 0 delayed; 1 job(s) IN_PROGRESS" in line
    assert output.code == 1


def test_a_dead_workers_silent_lease_with_no_worker_alive_is_a_presumed_dead_worker_and_no_consumer(
    world, async_on, settings
):
    settings.JOB_HEARTBEAT_SECONDS = 1
    job = kill_mid_job(world, JOB_HEARTBEAT_SECONDS=1)

    found = wait_until(
        lambda: (lambda out: out if doctor.WORKER_PRESUMED_DEAD in kinds(out) else None)(run("doctor", "--apply")),
        timeout=30,
    )

    assert kinds(found) == {**no_consumer_anywhere(), doctor.WORKER_PRESUMED_DEAD: {str(job.id)}}
    assert "phase generating" in line_of(found, doctor.WORKER_PRESUMED_DEAD)
    assert found.code == 1
    assert messages_in_queue() == 1  # the dead worker's message, in flight; nothing added
    assert AsyncJob.objects.get(id=job.id).lease_token == job.lease_token  # a live lease is never taken


def test_a_dead_workers_expired_lease_with_no_worker_alive_is_held_back_and_nothing_is_re_sent(world, async_on):
    job = kill_mid_job(world, **SHORT_LEASE)
    wait_until(lambda: AsyncJob.objects.get(id=job.id).lease_state() == "expired", timeout=30)

    first, second = run("doctor", "--apply"), run("doctor", "--apply")

    for output in (first, second):
        assert kinds(output) == {**no_consumer_anywhere(), doctor.LEASE_EXPIRED: {str(job.id)}}
        line = line_of(output, doctor.LEASE_EXPIRED)
        assert "held back: no worker is alive to take it" in line and not line.endswith("[done]")
        assert output.code == 1
    assert messages_in_queue() == 1  # the original, in flight: no copy for nobody
    assert AsyncJob.objects.get(id=job.id).lease_token == job.lease_token


def test_a_job_never_sent_with_no_worker_alive_is_sent_once_and_runs_when_a_worker_comes(world, async_on, queues):
    job, _ = start_job(world)
    queues.drain()
    before = timezone.now() - timedelta(minutes=5)
    AsyncJob.objects.filter(id=job.id).update(message_sent_at=None, updated_at=before)  # a crash before the send

    first, second = run("doctor", "--apply"), run("doctor", "--apply")

    assert kinds(first) == {**no_consumer_anywhere(), doctor.WAITING_WITHOUT_MESSAGE: {str(job.id)}}
    assert line_of(first, doctor.WAITING_WITHOUT_MESSAGE).endswith("[done]")
    assert kinds(second) == no_consumer_anywhere()  # just re-sent: nothing more to send
    assert messages_in_queue() == 1
    with live_worker():
        job = wait_terminal(job, timeout=60)
    assert job.status == "COMPLETED", job.error


# --- Deliveries that keep dying ---------------------------------------------------------------------------------


def test_a_job_whose_deliveries_died_twice_is_never_re_sent_even_before_its_message_reaches_the_dlq(
    world, async_on, queues
):
    job, _ = start_job(world)
    queues.sqs.client().set_queue_attributes(QueueUrl=queues.url, Attributes={"VisibilityTimeout": "4"})
    fast = {**KILLED_FAST, "WORKER_HEARTBEAT_SECONDS": 1}
    for _ in range(2):  # each worker receives the message, claims the job and dies: no worker is left
        assert crash_worker("after_claim", timeouts=fast) == -signal.SIGKILL
    wait_until(lambda: AsyncJob.objects.get(id=job.id).lease_state() == "expired", timeout=30)
    wait_until(lambda: selectors.workers_alive(MARKET_JOBS) == 0, timeout=30)
    job.refresh_from_db()
    assert (job.attempts, job.lost_deliveries) == (2, 1)  # the second claim took the first one's lease over
    redrive = json.loads(sqs.queue_attributes(queues.url)["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == 8 and total(queue_counts("dlq")["dlq"]) == 0  # not in the DLQ

    output = run("doctor", "--apply")

    assert kinds(output)[doctor.CRASH_LOOP] == {str(job.id)}
    assert doctor.LEASE_EXPIRED not in kinds(output)
    assert "its last 2 deliveries died without an outcome" in line_of(output, doctor.CRASH_LOOP)
    assert output.code == 1
    assert messages_in_queue() == 1  # only its own message, which SQS redelivers until the DLQ takes it
    assert job.events.filter(kind__in=["requeued", "redriven"]).count() == 0
