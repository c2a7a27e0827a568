"""The API's graceful restarts drop no request: gunicorn's HUP (new workers, the old ones told to stop) and its
TERM (the whole server stops) while ordinary requests and waiting polls are in flight from many threads.

Every request in flight gets a whole answer below 500: no reset, no connection closed before the answer, no
500/502. A waiting poll (`?wait=20`) in flight when its worker is told to stop answers then, as a plain poll
(304, the same ETag), rather than sleeping on until the worker is killed: gunicorn here kills what is still
running GRACE seconds after the stop, well inside the wait, so a wait that slept on would be cut.
"""

import signal
import threading
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest

from tests.markets.generation.conftest import CALLER_ORG, make_brand, make_job, make_org
from tests.servers import Gunicorn, gunicorn

pytestmark = pytest.mark.django_db(transaction=True)

GRACE = 5  # gunicorn's graceful_timeout here: under the waits, so only a wait that answers on the stop survives
WAIT = 20  # what a waiting UI asks for (docs/api.md "How a UI should use it")
ORDINARY_THREADS = 8
WAITING_THREADS = 24
RESTARTS = 3
ANSWERS_BETWEEN_SIGNALS = 150  # ordinary answers served by the new workers before the next signal


@dataclass
class Load:
    """Threads that keep requests in flight until `stop` is set; every outcome is recorded."""

    server: Gunicorn
    poll: str
    headers: dict[str, str]
    etag: str
    phase: str = "start"  # the last signal sent: "start", "HUP 1", … "TERM"
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ordinary: Counter = field(default_factory=Counter)
    waits: Counter = field(default_factory=Counter)
    # Per waiting thread, the outcome of the request it had in flight when the stop was set.
    last_wait: dict[int, str] = field(default_factory=dict)

    def outcome(self, send) -> str:
        try:
            answer = send()
        except httpx.HTTPError as exc:  # a reset, a connection closed before the answer, a timeout
            return type(exc).__name__
        answer.read()
        return str(answer.status_code)

    def client(self) -> httpx.Client:
        # A connection per request: an idle kept-alive connection closed by a stopping worker is a race every
        # HTTP client must retry (RFC 9112 §9.3.1), not a request the server dropped.
        return httpx.Client(base_url=self.server.url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0))

    def ordinary_requests(self, n: int) -> None:
        with self.client() as client:
            i = n
            while not self.stop.is_set():
                i += 1
                path = "/readyz" if i % 2 else self.poll  # the readiness probe, and a plain poll of the job
                outcome = self.outcome(lambda path=path: client.get(path, headers=self.headers))
                with self.lock:
                    self.ordinary[self.phase, outcome] += 1

    def waiting_polls(self, n: int) -> None:
        headers = {**self.headers, "If-None-Match": self.etag}
        with self.client() as client:
            while not self.stop.is_set():
                outcome = self.outcome(lambda: client.get(self.poll, params={"wait": WAIT}, headers=headers))
                with self.lock:
                    self.waits[self.phase, outcome] += 1
                    self.last_wait[n] = outcome

    def served(self) -> int:
        with self.lock:
            return sum(count for (_, outcome), count in self.ordinary.items() if outcome.isdigit())


def wait_until(condition, server: Gunicorn, what: str) -> None:
    stopped = threading.Event()
    while not condition():
        assert server.master.poll() is None, f"gunicorn exited while waiting for {what}"
        stopped.wait(0.05)


def test_hup_and_term_drop_no_request_in_flight(tmp_path, sims, bearer):
    org = make_org(CALLER_ORG)
    brand = make_brand(org, "Restart")
    job = make_job(org=org, brand=brand, site=brand.base_site)
    poll = f"/v2/orgs/{org.id}/brands/{brand.id}/serenity/markets/generation/jobs/{job.id}"
    headers = {"Authorization": f"Bearer {bearer(user_id='user-1', org_ids=[CALLER_ORG])}"}

    with gunicorn(tmp_path, WEB_CONCURRENCY="2", GUNICORN_GRACEFUL_TIMEOUT=str(GRACE)) as server:
        first = httpx.get(server.url + poll, headers=headers, timeout=30)
        assert first.status_code == 200
        load = Load(server, poll, headers, first.headers["ETag"])
        threads = [threading.Thread(target=load.ordinary_requests, args=(n,)) for n in range(ORDINARY_THREADS)]
        threads += [threading.Thread(target=load.waiting_polls, args=(n,)) for n in range(WAITING_THREADS)]
        for thread in threads:
            thread.start()
        try:
            for restart in range(1, RESTARTS + 1):
                old = server.workers()
                target = load.served() + ANSWERS_BETWEEN_SIGNALS
                wait_until(lambda target=target: load.served() >= target, server, "ordinary answers")
                load.phase = f"HUP {restart}"
                server.master.send_signal(signal.SIGHUP)
                # The next signal once the old workers are gone and the new ones have answered.
                wait_until(lambda old=old: not (server.workers() & old), server, "the old workers to exit")
                target = load.served() + ANSWERS_BETWEEN_SIGNALS
                wait_until(lambda target=target: load.served() >= target, server, "the new workers' answers")
            with load.lock:
                waits_before_term = sum(load.waits.values())
            load.stop.set()  # no thread starts another request; those in flight go on
            load.phase = "TERM"
            server.master.send_signal(signal.SIGTERM)
            exit_code = server.master.wait(timeout=120)
        finally:
            load.stop.set()
            for thread in threads:
                thread.join(timeout=120)

    ordinary, waits = sorted(load.ordinary.items()), sorted(load.waits.items())
    outcomes = {
        "exit code": exit_code,
        # /readyz, and the job as it is. A thread that began its request just before the stop may connect after
        # the TERM closed the listening sockets: refused, it reached no server, so nothing of it was dropped.
        "ordinary": {outcome for (phase, outcome), _ in ordinary if (phase, outcome) != ("TERM", "ConnectError")},
        "waiting polls": {outcome for (_, outcome), _ in waits},  # the job never changes
        # Every waiting thread had a poll in flight at the TERM, and it was answered.
        "in flight at the TERM": load.last_wait,
    }
    assert outcomes == {
        "exit code": 0,
        "ordinary": {"200"},
        "waiting polls": {"304"},
        "in flight at the TERM": {n: "304" for n in range(WAITING_THREADS)},
    }, f"ordinary {ordinary}, waiting {waits}"
    assert sum(count for _, count in ordinary) >= 2 * RESTARTS * ANSWERS_BETWEEN_SIGNALS
    assert sum(count for _, count in waits) > waits_before_term
