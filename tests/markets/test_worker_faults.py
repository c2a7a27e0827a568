"""Faults around a running delivery, with real workers, the local SQS and PostgreSQL: the database dropping
every connection during a DRS call, a delivery out of time, a worker stopped with SIGTERM mid-call, and SQS
unreachable when a job is enqueued."""

import os
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings as django_settings

from jobs.models import AsyncJob
from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from sandbox.semrush import state as semrush
from serenity.celery import app
from tests.failover import terminate_every_other_backend
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_terminal, wait_until

pytestmark = pytest.mark.worker

REPO = Path(__file__).resolve().parents[2]


def wait_for_phase(job, phase: str, timeout: float = 20.0):
    def reached():
        job.refresh_from_db()
        return job.phase == phase

    wait_until(reached, timeout)


def test_a_database_that_drops_every_connection_during_drs_costs_no_second_drs_call(world, async_on, celery_worker):
    drs_controls.set_latency(3000, remaining=1)
    job, market = start_job(world)
    wait_for_phase(job, "generating")
    # The DRS simulator records the call before its delay: from then on the call is in flight and the
    # simulator holds no transaction that the terminations could break (they are meant for the worker's).
    wait_until(lambda: drs.call_count() == 1)

    assert terminate_every_other_backend() >= 1
    job = wait_terminal(job, timeout=20)

    assert job.status == "COMPLETED", job.error
    assert drs.call_count() == 1
    assert job.attempts == 1  # the same delivery carried on; no redelivery after the visibility timeout
    assert len(semrush.prompts(market.semrush_project_id)) == 50


def test_a_delivery_out_of_time_hands_the_job_back_and_a_redelivery_completes_it(
    world, async_on, celery_worker, settings
):
    settings.JOB_TASK_TIME_LIMIT_SECONDS = 3
    drs_controls.set_latency(2500, remaining=1)  # leaves too little of the first delivery's budget to write
    job, _market = start_job(world)

    job = wait_terminal(job, timeout=30)

    assert job.status == "COMPLETED", job.error
    assert job.attempts == 2 and drs.call_count() == 1
    released = job.events.filter(kind="lease_released").values_list("detail", flat=True)
    assert "delivery budget spent before writing" in list(released)


def worker_process(extra_env: dict) -> subprocess.Popen:
    db = django_settings.DATABASES["default"]
    env = {
        **os.environ,
        **{k: str(v) for k, v in extra_env.items()},
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


def test_a_worker_stopped_mid_drs_call_hands_its_job_to_another_worker_before_the_visibility_timeout(
    world, async_on, queues
):
    drs_controls.set_latency(8000, remaining=1)
    job, market = start_job(world)
    stopping = worker_process({"WORKER_STOP_GRACE_SECONDS": 1, "WORKER_STOP_DRAIN_SECONDS": 1})
    try:
        wait_for_phase(job, "generating", timeout=30)
        os.kill(stopping.pid, signal.SIGTERM)
        with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"):
            # Only a hang guard, far below the queue's visibility timeout: a job still waiting here was not
            # handed over and would only come back with the redelivery.
            job = wait_terminal(job, timeout=django_settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS / 3)
        assert stopping.wait(timeout=30) == 0  # a warm shutdown, once its own call returned
    finally:
        if stopping.poll() is None:
            stopping.kill()
            stopping.wait()

    assert job.status == "COMPLETED", job.error
    # The stopping worker gave the job back, and a second delivery (not a third after a lost one) finished it.
    kinds = list(job.events.order_by("at", "id").values_list("kind", "detail"))
    released = kinds.index(("lease_released", "worker stopping"))
    assert [k for k, _ in kinds[released:]].count("lease_claimed") == 1
    # The stop gave its delivery's attempt back: only the second delivery's counts.
    assert job.attempts == 1 and job.lost_deliveries == 0
    assert len(semrush.prompts(market.semrush_project_id)) == 50


@contextmanager
def broker_at(port: int):
    """Point the Celery app's producer at 127.0.0.1:`port`, keeping every other transport option; the app's
    own connection and producer pools are put back untouched afterwards."""
    saved_url, saved_options = app.conf.broker_url, app.conf.broker_transport_options
    saved_pools = app._pool, app.amqp._producer_pool
    options = {
        **saved_options,
        "predefined_queues": {
            name: {**queue, "url": f"http://127.0.0.1:{port}/123456789012/{name}"}
            for name, queue in saved_options["predefined_queues"].items()
        },
    }
    app.conf.broker_url, app.conf.broker_transport_options = f"sqs://127.0.0.1:{port}", options
    app._pool, app.amqp._producer_pool = None, None
    try:
        yield
    finally:
        app.amqp.producer_pool.connections.force_close_all()
        app.conf.broker_url, app.conf.broker_transport_options = saved_url, saved_options
        app._pool, app.amqp._producer_pool = saved_pools


class Blackhole:
    """A port that accepts connections, reads what is sent and never answers: SQS as a network partition
    leaves it. Counts the connections (each attempt of the client is one)."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.connections.append(conn)

    def close(self):
        self.stopped.set()
        self.thread.join()
        for conn in self.connections:
            conn.close()
        self.server.close()


@pytest.fixture
def blackhole():
    hole = Blackhole()
    yield hole
    hole.close()


def test_sqs_not_answering_fails_the_enqueue_after_its_bounded_attempts_and_the_api_stays_ready(
    world, async_on, blackhole
):
    from django.test import Client

    with broker_at(blackhole.port):
        response = world.post(
            world.url("markets"),
            {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True},
            **{"x-promise-audience": "semrush"},
        )
        ready = Client().get("/readyz")

    assert response.status_code == 201
    assert {k: response.json()["promptGeneration"][k] for k in ("status", "code")} == {
        "status": "failed",
        "code": "ENQUEUE_FAILED",
    }
    # Bounded by attempts, not by a clock: the send tried SQS_MAX_ATTEMPTS times, each cut by its read timeout.
    assert len(blackhole.connections) == django_settings.SQS_MAX_ATTEMPTS
    assert AsyncJob.objects.get().error_code == "ENQUEUE_FAILED"
    assert (ready.status_code, ready.json()["status"]) == (200, "ok")


def test_the_workers_readiness_reports_the_broker_down(db, settings, capsys):
    from django.core.management import call_command

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    settings.AWS_ENDPOINT_URL = f"http://127.0.0.1:{closed}"
    settings.MARKET_JOBS_QUEUE_URL = f"http://127.0.0.1:{closed}/123456789012/serenity-market-jobs"
    settings.MAINTENANCE_QUEUE_URL = f"http://127.0.0.1:{closed}/123456789012/serenity-maintenance"

    with pytest.raises(SystemExit) as exited:
        call_command("worker_readiness")

    assert exited.value.code == 1
    assert capsys.readouterr().out.strip() == (
        '{"status": "unavailable", "checks": {"database": "ok", "broker": "unreachable"}}'
    )


def test_the_workers_readiness_is_ok_when_database_and_queues_answer(db, queues, capsys):
    from django.core.management import call_command

    call_command("worker_readiness")

    assert capsys.readouterr().out.strip() == '{"status": "ok", "checks": {"database": "ok", "broker": "ok"}}'
