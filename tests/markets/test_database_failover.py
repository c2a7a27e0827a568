"""A database failover with warm pools (every backend of the service's database terminated): no API request
fails because the pool handed it a dead connection. Real HTTP to a threaded live server, real threads."""

import threading
import uuid

import httpx
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def terminate_every_other_backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


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
