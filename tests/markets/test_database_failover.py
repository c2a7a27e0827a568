"""A database failover with warm pools (every backend of the service's database terminated): no API request
fails because the pool handed it a dead connection. Real HTTP to a threaded live server, real threads."""

import threading
import uuid

import httpx
import pytest
from celery.signals import task_prerun
from django.db import OperationalError, connection

from serenity.celery import app
from tests.failover import terminate_every_backend, terminate_every_other_backend, unpooled_connection
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def concurrent_statuses(url: str, headers: dict, *, threads: int) -> list[int]:
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def one() -> None:
        start.wait()
        status = httpx.get(url, headers=headers, timeout=60).status_code
        with lock:
            statuses.append(status)

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return statuses


def test_three_failovers_in_a_row_with_warm_pools_give_no_5xx(live_server, world):
    url = f"{live_server.url}{world.url(f'markets/generation/jobs/{uuid.uuid4()}')}"
    headers = {"Authorization": f"Bearer {world.token}"}
    assert set(concurrent_statuses(url, headers, threads=6)) == {404}  # a poll of a job that is not there

    statuses = []
    for _ in range(3):
        assert terminate_every_other_backend() >= 1  # the pool's idle connections, warm, all die
        statuses += concurrent_statuses(url, headers, threads=6)
        statuses += [httpx.get(f"{live_server.url}/readyz").status_code]

    assert [s for s in statuses if s >= 500] == []
    assert statuses.count(404) == 18 and statuses.count(200) == 3


def test_the_checkout_test_can_be_turned_off(live_server, world, settings):
    """DB_POOL_CHECK=false: the pool hands its connections out untested, as Django's backend does, so the
    request that draws a dead one fails: what the test above guards against."""
    settings.DB_POOL_CHECK = False
    url = f"{live_server.url}{world.url(f'markets/generation/jobs/{uuid.uuid4()}')}"
    headers = {"Authorization": f"Bearer {world.token}"}
    assert set(concurrent_statuses(url, headers, threads=4)) == {404}

    assert terminate_every_other_backend() >= 1
    statuses = concurrent_statuses(url, headers, threads=4)

    assert any(s >= 500 for s in statuses)


@pytest.mark.worker
def test_a_delivery_meeting_a_dead_connection_before_its_claim_runs_on_a_fresh_one(
    world, async_on, celery_worker, settings, caplog
):
    """With the checkout test off, the delivery's first statement meets a connection the database dropped:
    it is read again on a fresh one, and the job completes on this receive, not after the visibility
    timeout (960 s here, far beyond the wait). The backends are terminated as the delivery starts, so the
    dead connections are the delivery's to meet, not those of the createMarket request before it."""
    import logging

    caplog.set_level(logging.INFO)
    settings.DB_POOL_CHECK = False
    terminated: list[int] = []

    def terminate_as_the_delivery_starts(**_) -> None:
        if not terminated:
            terminated.append(terminate_every_backend())

    task_prerun.connect(terminate_as_the_delivery_starts, weak=False)
    try:
        job, _ = start_job(world)
        job = wait_until(lambda: terminal_surviving_the_drop(job), timeout=30)
    finally:
        task_prerun.disconnect(terminate_as_the_delivery_starts)

    assert terminated and terminated[0] >= 1
    assert job.status == "COMPLETED", job.error
    assert job.attempts == 1
    assert any("met a dead connection" in r.getMessage() for r in caplog.records)


def terminal_surviving_the_drop(job):
    """`job`, refreshed, once no longer IN_PROGRESS; a read that meets this test's dropped connection is
    given up and made again on the next poll."""
    try:
        job.refresh_from_db()
    except OperationalError:
        connection.close()
        return None
    return job if job.status != "IN_PROGRESS" else None


@pytest.mark.worker
def test_a_delivery_the_database_fails_before_its_claim_hands_its_message_back_at_once(
    transactional_db, queues, celery_worker, caplog
):
    """The table locked beyond the lock timeout, twice: the delivery fails before its claim even on a fresh
    connection, so its message is made visible again at once and the next receive handles it, long before
    the visibility timeout (960 s)."""
    import logging

    from django.conf import settings as django_settings

    caplog.set_level(logging.INFO)
    locker = unpooled_connection()
    locker.execute("LOCK TABLE async_jobs IN ACCESS EXCLUSIVE MODE")
    try:
        app.send_task(
            "jobs.run",
            kwargs={"jobId": str(uuid.uuid4()), "type": "market_prompt_generation"},
            queue=django_settings.MARKET_JOBS_QUEUE,
        )
        wait_until(lambda: handed_back(caplog) >= 1, timeout=40)
    finally:
        locker.rollback()
        locker.close()

    wait_until(lambda: handled(caplog, "dropped") == 1, timeout=40)
    assert handed_back(caplog) >= 1


def handed_back(caplog) -> int:
    return sum("handed back at once" in r.getMessage() for r in caplog.records)


def handled(caplog, kind: str) -> int:
    return sum(r.getMessage() == "job delivery handled" and getattr(r, "outcome", None) == kind for r in caplog.records)
