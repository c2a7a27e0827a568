"""Worker heartbeats, with real Celery workers on the local SQS and PostgreSQL: a running worker keeps one row
naming the queues it consumes, a warm stop removes it, a SIGKILLed worker stops counting as alive once its row
is three beats old, and a worker whose consumer loop stops turning withholds its beat."""

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings as django_settings
from django.utils import timezone

from jobs import selectors
from jobs.models import WorkerHeartbeat
from jobs.worker.heartbeats import HeartbeatWriter, heartbeats_forget_silent
from serenity.celery import app
from tests.waits import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[3]


def both_queues() -> list[str]:
    return [django_settings.MARKET_JOBS_QUEUE, django_settings.MAINTENANCE_QUEUE]


def worker_process(**env) -> subprocess.Popen:
    """A real worker process (tests/crashing_worker.py, crashing nowhere) on this test database."""
    db = django_settings.DATABASES["default"]
    env = {
        **os.environ,
        **{k: str(v) for k, v in env.items()},
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
    }
    return subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "crashing_worker.py"), "never"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_a_running_worker_keeps_a_heartbeat_for_the_queues_it_consumes_and_a_warm_stop_removes_it(queues, settings):
    settings.WORKER_HEARTBEAT_SECONDS = 1
    with start_worker(
        app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING", queues=both_queues()
    ):
        (row,) = wait_until(lambda: list(WorkerHeartbeat.objects.all()), timeout=30)
        first = row.beat_at
        wait_until(lambda: WorkerHeartbeat.objects.get(worker=row.worker).beat_at > first, timeout=30)

        assert row.worker.endswith(f":{os.getpid()}")
        assert sorted(row.queue_names) == sorted(both_queues())
        assert selectors.workers_alive(django_settings.MARKET_JOBS_QUEUE) == 1
        assert selectors.workers_alive(django_settings.MAINTENANCE_QUEUE) == 1

    assert not WorkerHeartbeat.objects.exists()
    assert selectors.workers_alive(django_settings.MARKET_JOBS_QUEUE) == 0


def test_a_worker_consuming_one_queue_is_no_consumer_of_the_other(queues, settings):
    settings.WORKER_HEARTBEAT_SECONDS = 1
    with start_worker(
        app,
        pool="threads",
        concurrency=1,
        perform_ping_check=False,
        loglevel="WARNING",
        queues=[django_settings.MARKET_JOBS_QUEUE],
    ):
        wait_until(lambda: selectors.workers_alive(django_settings.MARKET_JOBS_QUEUE) == 1, timeout=30)

        assert selectors.workers_alive(django_settings.MAINTENANCE_QUEUE) == 0


def test_a_sigkilled_worker_stops_counting_as_alive_once_its_heartbeat_is_three_beats_old(queues, settings):
    settings.WORKER_HEARTBEAT_SECONDS = 1
    worker = worker_process(WORKER_HEARTBEAT_SECONDS=1, TEST_WORKER_QUEUES=",".join(both_queues()))
    try:
        wait_until(lambda: selectors.workers_alive(django_settings.MARKET_JOBS_QUEUE) == 1, timeout=60)
        os.kill(worker.pid, signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    (row,) = WorkerHeartbeat.objects.all()  # a killed worker cannot remove its row: it ages out
    assert row.worker.endswith(f":{worker.pid}")

    wait_until(lambda: selectors.workers_alive(django_settings.MARKET_JOBS_QUEUE) == 0, timeout=30)

    row.refresh_from_db()
    assert timezone.now() - row.beat_at > selectors.worker_ttl()
    assert selectors.worker_last_seen(django_settings.MARKET_JOBS_QUEUE) == row


def test_a_consumer_loop_that_stops_turning_withholds_the_heartbeat():
    writer = HeartbeatWriter("host-a:1", both_queues(), interval=10)

    assert writer.beat_if_turning() is True  # the loop ticked at start
    written = WorkerHeartbeat.objects.get(worker="host-a:1").beat_at
    writer._ticked -= 21  # no tick for more than two intervals: the loop is stuck although the process lives

    assert writer.beat_if_turning() is False
    assert WorkerHeartbeat.objects.get(worker="host-a:1").beat_at == written

    writer.tick()
    assert writer.beat_if_turning() is True
    assert WorkerHeartbeat.objects.get(worker="host-a:1").beat_at > written


def test_rows_of_workers_silent_past_the_retention_window_are_forgotten_when_a_worker_starts(settings):
    settings.WORKER_HEARTBEAT_RETENTION_SECONDS = 3600
    now = timezone.now()
    WorkerHeartbeat.objects.create(worker="old:1", queues=",q,", beat_at=now - timedelta(minutes=61))
    WorkerHeartbeat.objects.create(worker="recent:1", queues=",q,", beat_at=now - timedelta(minutes=59))

    assert heartbeats_forget_silent(now=now) == 1
    assert list(WorkerHeartbeat.objects.values_list("worker", flat=True)) == ["recent:1"]


def test_a_heartbeat_after_the_database_dropped_every_connection_is_written_on_a_fresh_one(settings):
    """A failover between two beats: the beat thread's next write meets a dead pooled connection (the
    checkout test off, so the write itself meets it) and is written again on a fresh one: no beat missed."""
    import threading

    from tests.failover import terminate_every_other_backend

    settings.DB_POOL_CHECK = False
    writer = HeartbeatWriter("host-f:1", both_queues(), interval=10)

    def beat() -> None:
        thread = threading.Thread(target=writer.beat_if_turning)
        thread.start()
        thread.join()

    beat()
    first = WorkerHeartbeat.objects.get(worker="host-f:1").beat_at
    assert terminate_every_other_backend() >= 1

    beat()

    assert WorkerHeartbeat.objects.get(worker="host-f:1").beat_at > first
