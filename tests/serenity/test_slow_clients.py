"""Slow clients cost nothing: connections that send part of a request head and then nothing, three times as many
as the API has threads, while another tenant polls a job and creates a market over the same server.

The API is served as the image serves it (gunicorn, `serenity/gunicorn.py`, two processes), at the suite's size:
GUNICORN_THREADS=4 ordinary threads and POLL_WAIT_MAX_WAITERS=4 waiting ones per process, 16 threads in all, and
S=48 half-open connections. The other tenant's requests must all be answered (each is given 30 s, three times the
read deadline: a server whose threads the half-open connections hold never answers them), and every half-open
connection must be closed by the server (EOF or reset) rather than left open, and only after the tenant had all its
answers: it never waited for their deadline. The measurement is printed
(`pytest -s`): docs/operations.md "Slow clients" quotes it, before and after.
"""

import socket
import statistics
import threading
import time

import httpx
import pytest

from tests.markets.factories import GenerationJobFactory
from tests.servers import gunicorn

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES, ORDINARY, WAITING = 2, 4, 4
THREADS = PROCESSES * (ORDINARY + WAITING)
HALF_OPEN = 3 * THREADS
READ_TIMEOUT = 10  # GUNICORN_REQUEST_READ_TIMEOUT for this server
CLIENT_TIMEOUT = 30  # what the other tenant gives each request
POLLS = 10
# Half of them cut off in the middle of a header, half with a whole head and part of the body it announces, as a
# slow or hostile client leaves a request.
PARTIAL_HEAD = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow-client\r\nX-Pad: "
PARTIAL_BODY = (
    b"POST /v2/orgs/x/brands HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Content-Length: 200\r\n\r\n{"name": "Slo'
)


class HalfOpen:
    def __init__(self, port: int, partial: bytes):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(partial)
        self.sent = time.monotonic()
        self.closed_after: float | None = None  # seconds from the partial head to the server's close

    def await_close(self, limit: float) -> None:
        """Read until the server closes the connection (whatever it answers first), or until `limit`."""
        self.sock.settimeout(limit)
        try:
            while self.sock.recv(65536):
                pass
            self.closed_after = time.monotonic() - self.sent
        except ConnectionResetError:
            self.closed_after = time.monotonic() - self.sent
        except TimeoutError:
            pass  # still open: the server never closed it
        finally:
            self.sock.close()


class Tenant:
    """Another tenant's requests, each recorded as (what, outcome, seconds); stops at its first failure."""

    def __init__(self, url: str, headers: dict[str, str]):
        self.client = httpx.Client(base_url=url, headers=headers, timeout=CLIENT_TIMEOUT)
        self.results: list[tuple[str, str, float]] = []
        self.last_answer = 0.0  # when its last request ended (time.monotonic())
        self.lock = threading.Lock()

    def send(self, what: str, method: str, path: str, **kwargs) -> bool:
        started = time.monotonic()
        try:
            outcome = str(self.client.request(method, path, **kwargs).status_code)
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        with self.lock:
            self.last_answer = time.monotonic()
            self.results.append((what, outcome, self.last_answer - started))
        return outcome.isdigit()


def test_half_open_connections_at_three_times_the_threads_cost_another_tenant_nothing(tmp_path, world):
    job = GenerationJobFactory(organization_id=world.org.id, brand_id=world.brand.id, user_id=world.user_id)
    poll = world.url(f"markets/generation/jobs/{job.id}")
    env = {
        "WEB_CONCURRENCY": str(PROCESSES),
        "GUNICORN_THREADS": str(ORDINARY),
        "POLL_WAIT_MAX_WAITERS": str(WAITING),
        "GUNICORN_REQUEST_READ_TIMEOUT": str(READ_TIMEOUT),
    }
    with gunicorn(tmp_path, **env) as server:
        tenant = Tenant(server.url, {"Authorization": f"Bearer {world.token}"})
        assert tenant.send("warm-up poll", "GET", poll)  # both processes up and serving
        half_open = [HalfOpen(server.port, (PARTIAL_HEAD, PARTIAL_BODY)[i % 2]) for i in range(HALF_OPEN)]
        threading.Event().wait(0.5)  # let the server read them (an order, not a bound: nothing is timed by it)

        def polls():
            for _ in range(POLLS):
                if not tenant.send("poll", "GET", poll):
                    return

        def create():
            body = {**world.brand_fields, "market": "FR", "languageCode": "fr"}
            tenant.send("createMarket", "POST", world.url("markets"), json=body)

        others = [threading.Thread(target=polls), threading.Thread(target=create)]
        for thread in others:
            thread.start()
        for thread in others:
            thread.join(timeout=POLLS * CLIENT_TIMEOUT + 60)
        closers = [threading.Thread(target=h.await_close, args=(READ_TIMEOUT + CLIENT_TIMEOUT,)) for h in half_open]
        for thread in closers:
            thread.start()
        for thread in closers:
            thread.join(timeout=READ_TIMEOUT + CLIENT_TIMEOUT + 30)

    measured = [r for r in tenant.results if r[0] != "warm-up poll"]
    closed = sorted(h.closed_after for h in half_open if h.closed_after is not None)
    first_close = min((h.sent + h.closed_after for h in half_open if h.closed_after is not None), default=None)
    latencies = [seconds * 1000 for _, outcome, seconds in measured if outcome.isdigit()]
    print(
        f"\nslow clients: S={HALF_OPEN} half-open connections, {THREADS} threads ({PROCESSES} processes x "
        f"{ORDINARY}+{WAITING}), read deadline {READ_TIMEOUT} s"
        f"\n  other tenant: {sum(o.isdigit() for _, o, _ in measured)}/{len(measured)} answered "
        f"({', '.join(sorted({f'{w} {o}' for w, o, _ in measured}))})"
        + (
            f", median {statistics.median(latencies):.0f} ms, max {max(latencies):.0f} ms"
            if latencies
            else ", none answered"
        )
        + f"\n  half-open closed by the server: {len(closed)}/{HALF_OPEN}"
        + (f", after {closed[0]:.2f}-{closed[-1]:.2f} s (median {statistics.median(closed):.2f} s)" if closed else "")
    )
    assert [(w, o) for w, o, _ in measured if not o.isdigit()] == []
    assert len(measured) == POLLS + 1
    assert {o for w, o, _ in measured if w == "poll"} == {"200"}
    assert [o for w, o, _ in measured if w == "createMarket"] == ["201"]
    assert len(closed) == HALF_OPEN  # every half-open socket closed by the server, none left open
    # And the tenant was answered while every one of them was still open: it never waited for their deadline.
    assert tenant.last_answer < first_close
