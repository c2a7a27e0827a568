"""A process holds at most IMS_MAX_IN_FLIGHT IMS calls at once: a burst of threads (a worker's DRS calls
returning together) queues before anything is sent, not at IMS, where a wait past IMS_TIMEOUT_SECONDS would
lose a rotated promise token. Real threads, real HTTP to the IMS simulator; the calls are held at the HTTP
seam until the test lets them go, so the bound is counted, not timed."""

import threading

import pytest

from serenity.clients import http
from tests.waits import wait_until
from tokens import pairs
from tokens.clients import ims
from tokens.types import PROMISE_TOKEN_TYPE, PromiseToken

pytestmark = pytest.mark.django_db(transaction=True)


def burst_of_invalidations(monkeypatch, callers: int) -> tuple[list[int], threading.Event, list[threading.Thread]]:
    """`callers` threads each invalidating a promise token; every call that reaches the HTTP seam records how
    many are there at once, then waits for the returned event before it is sent."""
    inside, peaks, go, lock = [0], [], threading.Event(), threading.Lock()
    real = ims._client

    class Held:
        """The thread's real IMS client; each attempt, once it is sent, counted and held."""

        def __init__(self, client):
            self.client = client

        def request(self, *args, **kwargs):
            with lock:
                inside[0] += 1
                peaks.append(inside[0])
            try:
                go.wait(30)
                return self.client.request(*args, **kwargs)
            finally:
                with lock:
                    inside[0] -= 1

    monkeypatch.setattr(ims, "_client", lambda: Held(real()))
    token = PromiseToken(promise_token="not-a-live-token", token_type=PROMISE_TOKEN_TYPE, expires_in=3600)

    def one() -> None:
        try:
            ims.invalidate(promise=token, pair=pairs.get_pair(pairs.SEMRUSH))
        except http.ClientError:
            pass  # what IMS answers an unknown token is not the subject here

    threads = [threading.Thread(target=one) for _ in range(callers)]
    for thread in threads:
        thread.start()
    return peaks, go, threads


def test_a_burst_of_ims_calls_holds_at_most_the_bound_at_once(sims, settings, monkeypatch):
    settings.IMS_MAX_IN_FLIGHT = 2
    peaks, go, threads = burst_of_invalidations(monkeypatch, callers=6)
    wait_until(lambda: len(peaks) == 2, what="two calls at the HTTP seam")
    go.set()
    for thread in threads:
        thread.join(30)

    assert len(peaks) == 6  # every call was made
    assert max(peaks) == 2


def test_without_a_bound_the_same_burst_reaches_ims_all_at_once(sims, settings, monkeypatch):
    settings.IMS_MAX_IN_FLIGHT = 0
    peaks, go, threads = burst_of_invalidations(monkeypatch, callers=6)
    wait_until(lambda: len(peaks) == 6, what="six calls at the HTTP seam")  # none was held back
    go.set()
    for thread in threads:
        thread.join(30)

    assert max(peaks) == 6
