"""The fleet's Semrush request-rate budget (SEMRUSH_MAX_CALLS_PER_SECOND), on PostgreSQL, against a test server that
records when each call arrives: callers on real threads and in two real processes never pass the budget in any
second, and a 429 pauses every caller of the pair, in this process and in another."""

import itertools
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from markets.clients import semrush_budget
from markets.clients.semrush import SemrushClient
from markets.models import SemrushRateBudget
from serenity.clients.http import Throttled
from tests import fleet

BUDGET = 5  # calls per second: slots of 200 ms, each second of the database's clock holding five


class Recorder(ThreadingHTTPServer):
    """Answers `GET /v1/ai-projects/<id>` with a published project (or with the next scripted status) and records
    each call's arrival: (epoch seconds, bearer, status)."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.calls: list[tuple[float, str, int]] = []
        self.script: list[tuple[int, str | None, float]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer_next(self, status: int, retry_after: str | None = None, *, stall: float = 0.0) -> None:
        """The next call is answered `status` (with `Retry-After`), `stall` seconds after it arrived."""
        with self.lock:
            self.script.append((status, retry_after, stall))


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def do_GET(self):
        arrived = time.time()
        with self.server.lock:
            status, retry_after, stall = self.server.script.pop(0) if self.server.script else (200, None, 0.0)
            self.server.calls.append((arrived, self.headers.get("Authorization", ""), status))
        time.sleep(stall)
        body = json.dumps({"status": "published"} if status == 200 else {"error": {"code": "rate_limited"}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder(settings, transactional_db):
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.SEMRUSH_API_BASE = server.url
    settings.SEMRUSH_MAX_CALLS_PER_SECOND = BUDGET
    settings.SEMRUSH_TIMEOUT_SECONDS = 10.0
    yield server
    server.shutdown()
    server.server_close()


def per_second(calls) -> Counter:
    """Calls by the second (epoch, whole seconds) they arrived in."""
    return Counter(int(arrived) for arrived, _bearer, _status in calls)


def call(bearer: str = "Bearer-1") -> None:
    SemrushClient(bearer, pair="semrush").publish_status(project_id="p")


def fleet_process(server: Recorder, kind: str, at: float, threads: int, *args: str):
    env = {
        "SEMRUSH_API_BASE": server.url,
        "SEMRUSH_MAX_CALLS_PER_SECOND": str(BUDGET),
        "SEMRUSH_TIMEOUT_SECONDS": "10",
    }
    return fleet.start(kind, at, threads, *args, env=env)


def test_callers_on_real_threads_never_pass_the_budget_in_any_second(recorder):
    """Six threads of three calls each, released at once: without the budget all eighteen arrive within the same
    second; with it no second holds more than five, and every call is made."""
    barrier = threading.Barrier(6)
    errors: list[Exception] = []

    def caller():
        try:
            barrier.wait(30)
            for _ in range(3):
                call()
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=caller) for _ in range(6)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]

    assert errors == []
    assert len(recorder.calls) == 18
    seconds = per_second(recorder.calls)
    assert max(seconds.values()) <= BUDGET, seconds
    assert len(seconds) >= 18 // BUDGET  # spread over the seconds the budget needs, not bunched


def test_callers_in_two_processes_never_pass_the_budget_in_any_second(recorder):
    """Two OS processes of four threads each, three calls a thread, started at the same moment: 24 calls in all,
    both processes' calls sharing seconds, and no second with more than the budget."""
    start = time.time() + 10  # both processes set up first (a loaded machine takes seconds), then call together
    procs = [fleet_process(recorder, "semrush", start, 4, "3", f"process-{n}") for n in (1, 2)]
    results = [fleet.result(p) for p in procs]

    assert [r["ok"] for r in results] == [12, 12] and [r["throttled"] for r in results] == [0, 0]
    assert len(recorder.calls) == 24
    seconds = per_second(recorder.calls)
    assert max(seconds.values()) <= BUDGET, seconds
    shared = {int(t) for t, bearer, _ in recorder.calls if bearer.endswith("process-1")} & {
        int(t) for t, bearer, _ in recorder.calls if bearer.endswith("process-2")
    }
    assert shared, "the two processes called in the same seconds"


def test_a_429_pauses_every_caller_of_the_pair_in_this_process_and_another(recorder):
    """Semrush answers one call 429 with Retry-After 60: that caller is throttled, and so is the next caller on
    another thread and two more in another process, none of them sending anything: Semrush saw one call."""
    recorder.answer_next(429, retry_after="60")

    with pytest.raises(Throttled) as first:
        call()
    assert first.value.retry_after == 60
    assert not isinstance(first.value, semrush_budget.OverBudget)  # Semrush's own refusal, counted as such

    errors: list[Exception] = []

    def other_thread():
        try:
            call()
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(30)
    other = fleet.result(fleet_process(recorder, "semrush", 0, 2, "1", "process-1"))

    assert len(errors) == 1 and isinstance(errors[0], Throttled)
    assert errors[0].retry_after > semrush_budget.WAIT_IN_PLACE_SECONDS  # told to come back after the pause
    assert other == {"threads": 2, "ok": 0, "throttled": 2}
    assert [status for _t, _b, status in recorder.calls] == [429]


def test_a_short_pause_is_waited_out_and_every_caller_sends_only_after_it(recorder, monkeypatch):
    """A 429 with Retry-After 2 (within the wait slept in place): the caller that got it waits and calls again, a
    caller on another thread that starts once the pause is stored waits too, and both calls arrive only after the
    pause stored on the row has ended."""
    recorder.answer_next(429, retry_after="2")
    paused = threading.Event()
    real_pause = semrush_budget.pause

    def pause(pair, retry_after):
        real_pause(pair, retry_after)
        paused.set()

    monkeypatch.setattr(semrush_budget, "pause", pause)

    def other_thread():
        paused.wait(30)
        try:
            call("Bearer-other")
        finally:
            connection.close()

    thread = threading.Thread(target=other_thread)
    thread.start()
    call()
    thread.join(30)

    paused_until = SemrushRateBudget.objects.get(pair="semrush").paused_until_us / 1_000_000
    assert [status for _t, _b, status in recorder.calls] == [429, 200, 200]
    assert sorted(bearer for _t, bearer, status in recorder.calls if status == 200) == [
        "Bearer Bearer-1",
        "Bearer Bearer-other",
    ]
    assert all(arrived >= paused_until for arrived, _b, status in recorder.calls if status == 200)


def test_a_slot_further_than_the_wait_in_place_is_not_taken_and_nothing_is_sent(recorder, metric_lines):
    """The pair is paused for a minute: a call raises Throttled at once, sends nothing, and takes no slot (the
    row's next slot is where it was). It is counted as the budget's deferral, not as a Semrush 429."""
    call()  # creates the row
    semrush_budget.pause("semrush", 60)
    before = SemrushRateBudget.objects.get(pair="semrush").next_slot_us

    with pytest.raises(Throttled) as refused:
        call()

    assert isinstance(refused.value, semrush_budget.OverBudget) and refused.value.status is None
    assert len(recorder.calls) == 1
    assert SemrushRateBudget.objects.get(pair="semrush").next_slot_us == before
    assert [doc.get("SemrushBudgetDeferred") for doc in metric_lines if "SemrushBudgetDeferred" in doc] == [1]
    assert not [doc for doc in metric_lines if "SemrushThrottled" in doc]


def test_a_pause_is_never_longer_than_the_longest_throttle_delay(recorder, settings):
    settings.JOB_THROTTLE_MAX_DELAY_SECONDS = 1
    call()
    semrush_budget.pause("semrush", 3600)
    row = SemrushRateBudget.objects.get(pair="semrush")
    with connection.cursor() as cursor:
        cursor.execute("SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint")
        now_us = cursor.fetchone()[0]
    assert row.paused_until_us - now_us <= 1_000_000


def test_a_call_without_a_pair_takes_no_slot(recorder):
    SemrushClient("Bearer-1").publish_status(project_id="p")
    assert len(recorder.calls) == 1
    assert not SemrushRateBudget.objects.exists()


def test_the_budget_off_sends_without_a_slot(recorder, settings):
    settings.SEMRUSH_MAX_CALLS_PER_SECOND = 0
    call()
    assert len(recorder.calls) == 1
    assert not SemrushRateBudget.objects.exists()


def test_a_reservation_takes_consecutive_slots_its_calls_use_in_order_while_other_callers_queue_behind_it(recorder):
    """A delivery's phase reserves its calls at once: they go one slot apart, at the budget's pace, and a caller
    that asks meanwhile gets the first slot after them, never one in between."""
    reservation = semrush_budget.reserve("semrush", 3, wait=5)
    first = SemrushRateBudget.objects.get(pair="semrush").next_slot_us / 1_000_000 - 3 / BUDGET
    client = SemrushClient("Bearer-reserved", pair="semrush", reservation=reservation)
    other = threading.Thread(target=call, args=("Bearer-other",))
    other.start()  # asks for its slot while the reserved calls are still to go
    for _call in range(3):
        client.publish_status(project_id="p")
    other.join()

    assert reservation.left() == 0
    order = [bearer for _arrived, bearer, _status in sorted(recorder.calls)]
    assert order == ["Bearer Bearer-reserved"] * 3 + ["Bearer Bearer-other"]
    # Each call at its own slot or after it, never before (the database's clock is the machine's): one slot apart.
    # (Not the gaps between arrivals: a first call that goes a little late, within its margin, shortens the first.)
    arrivals = [arrived for arrived, _b, _s in sorted(recorder.calls)]
    assert all(arrived >= first + n / BUDGET for n, arrived in enumerate(arrivals)), [a - first for a in arrivals]


def test_a_reservation_further_than_its_wait_is_not_taken(recorder):
    call()  # creates the row
    semrush_budget.pause("semrush", 60)
    before = SemrushRateBudget.objects.get(pair="semrush").next_slot_us

    with pytest.raises(semrush_budget.OverBudget) as refused:
        semrush_budget.reserve("semrush", 4, wait=30)

    assert 30 < refused.value.retry_after <= 61
    assert SemrushRateBudget.objects.get(pair="semrush").next_slot_us == before
    assert semrush_budget.reserve("semrush", 4, wait=62).left() == 4


def test_a_call_beyond_the_reservation_waits_at_the_end_of_the_line_however_long_rather_than_handing_back(recorder):
    """A workspace's first job creates its tags: calls its reservation did not count. Each reserves one more slot
    at the end of the line and waits for it, even when the line is longer than a call waits for in place: handing
    the job back would send it to the end of the line again, and the next time too."""
    reservation = semrush_budget.reserve("semrush", 1, wait=30)
    semrush_budget.reserve("semrush", 6 * BUDGET, wait=30)  # the fleet's next six seconds are taken
    client = SemrushClient("Bearer-reserved", pair="semrush", deadline=time.monotonic() + 3, reservation=reservation)

    client.publish_status(project_id="p")
    client.publish_status(project_id="p")  # beyond its reservation, six seconds in line and its deadline 3 s

    arrivals = sorted(arrived for arrived, _b, _s in recorder.calls)
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 6
    assert reservation.waited >= 5.5


def test_a_reserved_call_that_would_go_late_takes_one_more_slot_instead(recorder):
    """A thread that reaches its reserved slot late (it waited for the database, or for the CPU) does not send at
    once: sent late, the call would join the calls of the slots after it in one second of Semrush's count."""
    reservation = semrush_budget.reserve("semrush", 1, wait=5)
    semrush_budget.reserve("semrush", BUDGET, wait=5)  # the next second's slots are other callers'
    time.sleep(reservation.starts_in() + 2 * reservation.margin)  # stalled past its slot and its margin
    client = SemrushClient("Bearer-late", pair="semrush", reservation=reservation)
    taken = SemrushRateBudget.objects.get(pair="semrush").next_slot_us

    started = time.time()
    client.publish_status(project_id="p")

    # One more slot taken, at the end of the line (after the others' second), and the call sent at it.
    assert SemrushRateBudget.objects.get(pair="semrush").next_slot_us == taken + semrush_budget.interval_us()
    assert len(recorder.calls) == 1 and recorder.calls[0][0] - started >= 0.5


def test_a_late_reservation_moves_its_calls_to_the_end_of_the_line_and_none_goes_at_its_stale_slots(recorder):
    """A delivery that reaches its reserved slots late (its exchange, its checkpoint, a burst's first seconds on a
    busy machine) finds every slot it holds stale, not only the first: none of its calls goes at one of them, in
    the seconds of other callers' slots. The calls move to the end of the line together, at fresh consecutive
    slots, each one slot apart."""
    reservation = semrush_budget.reserve("semrush", 4, wait=5)
    semrush_budget.reserve("semrush", 2 * BUDGET, wait=5)  # the next two seconds' slots are other callers'
    time.sleep(reservation.starts_in() + 3 / BUDGET + 2 * reservation.margin)  # stalled past all four and margin
    client = SemrushClient("Bearer-late", pair="semrush", reservation=reservation)
    taken = SemrushRateBudget.objects.get(pair="semrush").next_slot_us

    started = time.time()
    for _call in range(4):
        client.publish_status(project_id="p")

    # Four fresh slots at the end of the line, after the others' (more than a second of them still ahead).
    assert SemrushRateBudget.objects.get(pair="semrush").next_slot_us == taken + 4 * semrush_budget.interval_us()
    arrivals = sorted(arrived for arrived, _b, _s in recorder.calls)
    assert len(arrivals) == 4 and arrivals[0] - started >= 1.0, [a - started for a in arrivals]
    assert all(later - earlier >= 1 / BUDGET - 0.02 for earlier, later in itertools.pairwise(arrivals)), [
        b - a for a, b in itertools.pairwise(arrivals)
    ]


def test_a_reserved_call_after_a_slow_answer_past_its_slot_moves_to_the_end_of_the_line(recorder):
    """A delivery's previous call answering slowly makes its next call late as surely as a stall does: sent at once,
    it would be counted in the second of the slots after it (two such calls of one delivery, beside that second's
    on-time calls, were a 429 of the bench's `semrush` scenario). It moves to a fresh slot at the end of the line."""
    reservation = semrush_budget.reserve("semrush", 2, wait=5)
    semrush_budget.reserve("semrush", BUDGET, wait=5)  # the next second's slots are other callers'
    others_end = SemrushRateBudget.objects.get(pair="semrush").next_slot_us / 1_000_000
    recorder.answer_next(200, stall=1 / BUDGET + 2 * reservation.margin)  # answered past the second slot's margin
    client = SemrushClient("Bearer-slow", pair="semrush", reservation=reservation)

    client.publish_status(project_id="p")
    taken = SemrushRateBudget.objects.get(pair="semrush").next_slot_us
    client.publish_status(project_id="p")

    assert SemrushRateBudget.objects.get(pair="semrush").next_slot_us == taken + semrush_budget.interval_us()
    arrivals = sorted(arrived for arrived, _b, _s in recorder.calls)
    # After the others' second, on the database's clock (the machine's): not at its own, stale, slot.
    assert len(arrivals) == 2 and arrivals[1] >= others_end, [a - others_end for a in arrivals]


def test_a_wait_after_the_reservations_answer_does_not_move_its_slots(recorder, monkeypatch):
    """The slots are on the database's clock; the thread that reserved them may wait after the statement's answer
    (for the GIL, for the pool) before it looks at its own clock. Its slots stay where the database put them."""
    monkeypatch.setattr(semrush_budget, "_clock", semrush_budget._Clock())
    release = semrush_budget.release_pooled_connection

    def release_then_wait():
        release()
        time.sleep(1.0)

    monkeypatch.setattr(semrush_budget, "release_pooled_connection", release_then_wait)
    reservation = semrush_budget.reserve("semrush", 3, wait=5)
    first_us = SemrushRateBudget.objects.get(pair="semrush").next_slot_us - 3 * semrush_budget.interval_us()
    with connection.cursor() as cursor:
        sent = time.monotonic()
        cursor.execute("SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint")
        (now_us,) = cursor.fetchone()
        received = time.monotonic()

    # The first slot, on this process's clock, as the database's own clock places it: within the statements' round
    # trips (far less than the second waited after the answer, however loaded the machine), never early.
    expected = first_us / 1_000_000 - (now_us / 1_000_000 - (sent + received) / 2)
    assert abs(reservation._slots[0] - expected) < 0.5, reservation._slots[0] - expected
    assert reservation._slots[0] > expected - (received - sent)  # never early


def test_the_clock_keeps_the_sample_with_the_shortest_round_trip_until_its_age_makes_it_worse():
    """Each sample places the database's reading at the moment its answer was read: late by at most its round
    trip, never early."""
    clock = semrush_budget._Clock()
    assert clock.offset(100.0, 100.010, 1_000_000_000) == pytest.approx(1000.0 - 100.010)  # 10 ms round trip
    # A slower round trip a second later brackets the database's reading less tightly: the first stays.
    assert clock.offset(101.0, 101.040, 1_001_500_000) == pytest.approx(1000.0 - 100.010)
    # A tighter one replaces it.
    assert clock.offset(102.0, 102.002, 1_002_000_000) == pytest.approx(1002.0 - 102.002)
    # Twenty seconds on, the old sample's round trip has grown past a 10 ms one by its age: the fresh one is taken.
    assert clock.offset(122.0, 122.010, 1_022_000_000) == pytest.approx(1022.0 - 122.010)
