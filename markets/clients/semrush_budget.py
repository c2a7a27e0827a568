"""The fleet's Semrush request-rate budget (SEMRUSH_MAX_CALLS_PER_SECOND), shared by every process through
PostgreSQL: one row per IMS client pair (`markets.models.SemrushRateBudget`, table `semrush_rate_budgets`).

Each request to Semrush first takes a slot: one conditional UPDATE that moves the row's `next_slot_us` one
interval (1 s / the budget) on and returns the slot it took. Slots are the grid of those intervals on the
database's clock (the one clock every process shares), so no two calls of the fleet share an interval and no
second of that clock holds more calls than the budget. The caller sleeps until its slot, holding no database
connection and no transaction (the statement commits by itself), then sends. A slot further away than a short
wait (WAIT_IN_PLACE_SECONDS, or what is left of the caller's deadline) is not taken: the call raises
`OverBudget` (a `Throttled`) without sending, as a Semrush 429 would, and the worker hands its job back for later;
it is counted in `SemrushBudgetDeferred`, apart from Semrush's own 429s (`SemrushThrottled`).

A worker's Semrush phase does not queue call by call: it reserves its calls' slots at once (`reserve`, one
statement taking that many consecutive slots), waits for the first as long as it can afford, and sends each call
at its own slot (`Reservation`), so a job is not handed back half-way and made to repeat its reads on resuming.

A Semrush 429 stores `paused_until_us` on the same row (its Retry-After, at most JOB_THROTTLE_MAX_DELAY_SECONDS;
one second without one): from then on, no call of any process takes a slot before the pause ends, so each waits
for it in place when that is within WAIT_IN_PLACE_SECONDS, or raises `OverBudget` without sending. A call that
had already taken its slot still goes.

PostgreSQL only: the embedded run (SQLite, one process) sends without it. SEMRUSH_MAX_CALLS_PER_SECOND=0 turns
it off.
"""

import math
import time

from django.conf import settings
from django.db import connection

from serenity.clients.http import Throttled
from serenity.db import release_pooled_connection

# The longest wait for a slot (or the end of a pause) slept in place, as a 429's short Retry-After is
# (serenity/clients/http.py THROTTLE_WAIT_IN_PLACE_SECONDS): longer, and the job is handed back instead.
WAIT_IN_PLACE_SECONDS = 5.0
# A 429 without Retry-After pauses the pair this long.
PAUSE_WITHOUT_RETRY_AFTER_SECONDS = 1.0

# How many slot intervals after its slot a reserved call may still go (`Reservation.margin`). Semrush counts a call
# when it arrives; a call arriving e after its slot, with e anywhere between e_min and e_max for the fleet's calls,
# puts in one second the calls of slots spread over 1 + (e_max - e_min) seconds. At the default budget (8 of
# Semrush's 10) that is at most 10 while e_max - e_min <= 2 intervals: one for this margin, one for the way to
# Semrush varying (seen up to 95 ms on a loaded two-core machine, docs/benchmarks.md).
LATE_MARGIN_INTERVALS = 1.0
LATE_MARGIN_FLOOR_SECONDS = 0.05

TABLE = "semrush_rate_budgets"
_NOW_US = "(extract(epoch from clock_timestamp()) * 1000000)::bigint"


def _grid(us: str) -> str:
    """`us` (microseconds) rounded up to the grid of %(iv)s-µs slots."""
    return f"((({us}) + %(iv)s - 1) / %(iv)s) * %(iv)s"


# The slot the next call would take: the first free one that is neither in the past nor in a pause.
_SLOT = f"greatest({_grid(_NOW_US)}, {TABLE}.next_slot_us, {_grid(TABLE + '.paused_until_us')})"
# One statement, the pair's first call included (its row is created with the first slot taken). No lock outlives
# it: the row lock is taken and released by this statement alone, and a caller that waited for it decides on the
# row as the other left it (ON CONFLICT DO UPDATE reads the latest version), so no two callers take one slot. A
# slot further than %(wait)s ahead is not taken: no row comes back and nothing changes. Built from constants only.
_TAKE = (
    f"INSERT INTO {TABLE} (pair, next_slot_us, paused_until_us) VALUES (%(pair)s, {_grid(_NOW_US)} + %(iv)s, 0) "  # noqa: S608
    f"ON CONFLICT (pair) DO UPDATE SET next_slot_us = {_SLOT} + %(iv)s WHERE {_SLOT} <= {_NOW_US} + %(wait)s "
    f"RETURNING next_slot_us - %(iv)s, {_NOW_US}"
)
# `n` consecutive slots at once, for the calls of one delivery's Semrush phase (`reserve`): same grid, same rule.
_RESERVE = (
    f"INSERT INTO {TABLE} (pair, next_slot_us, paused_until_us) "  # noqa: S608
    f"VALUES (%(pair)s, {_grid(_NOW_US)} + %(n)s * %(iv)s, 0) "
    f"ON CONFLICT (pair) DO UPDATE SET next_slot_us = {_SLOT} + %(n)s * %(iv)s WHERE {_SLOT} <= {_NOW_US} + %(wait)s "
    f"RETURNING next_slot_us - %(n)s * %(iv)s, {_NOW_US}"
)
_WAIT = f"SELECT {_SLOT} - {_NOW_US} FROM {TABLE} WHERE pair = %(pair)s"  # noqa: S608 (constants only)
_PAUSE = (
    f"UPDATE {TABLE} SET paused_until_us = greatest(paused_until_us, {_NOW_US} + %(pause)s) "  # noqa: S608
    "WHERE pair = %(pair)s"
)


class _Clock:
    """The database's clock against this process's `time.monotonic()`: slots are on the database's clock, a thread
    sleeps on its own. Each budget statement returns the database's time, read somewhere between the moment the
    statement was sent and the moment its answer was read. Taking that reading as the moment the answer was read
    puts the process's slots late by at most the statement's round trip, never early (a call never arrives before
    its slot, in the second of the slots before it): so the offset is taken from the statement whose round trip
    was shortest, its round trip growing with its age by CLOCK_DRIFT so that a fresher sample with a slightly
    longer one replaces it in time. Taken from each reservation's own statement instead, every slot of a
    reservation was late by whatever its thread waited for after the answer (the GIL, the pool), unseen by the
    lateness check: 7 ms typically on a loaded two-core machine, 135 ms at worst."""

    def __init__(self):
        self._best: tuple[float, float, float] | None = None  # offset, its round trip, when (monotonic)

    def offset(self, sent: float, received: float, db_us: int) -> float:
        """Take one sample (the statement sent at `sent`, answered by `received`, read the database's `db_us`) and
        return the offset to use now: database seconds minus `time.monotonic()`."""
        trip = received - sent
        best = self._best
        if best is None or trip <= best[1] + (received - best[2]) * CLOCK_DRIFT:
            best = self._best = (db_us / 1_000_000 - received, trip, received)
        return best[0]


# How fast the error of a clock sample grows with its age: clocks drift, and NTP slews the database's by up to
# 500 ppm.
CLOCK_DRIFT = 5e-4
_clock = _Clock()


class OverBudget(Throttled):
    """The fleet's budget has no slot for this call within the wait allowed: nothing was sent. Semrush did not
    refuse anything, so it carries no HTTP status; `retry_after` is the seconds until a slot would be free."""

    def __init__(self, message: str, *, retry_after: float):
        super().__init__(message, status=None, retry_after=retry_after)


def enabled() -> bool:
    return settings.SEMRUSH_MAX_CALLS_PER_SECOND > 0 and connection.vendor == "postgresql"


def interval_us() -> int:
    """The slot width: one second over the budget, rounded up (the rate stays at or under the budget)."""
    return math.ceil(1_000_000 / settings.SEMRUSH_MAX_CALLS_PER_SECOND)


def take_slot(pair: str, *, deadline: float | None = None, what: str = "semrush") -> None:
    """Wait for this call's slot in the fleet's budget of `pair`, then return (the caller sends at once).

    Raises `OverBudget` (its `retry_after` the seconds until a slot would be free) without taking a slot when
    the wait would be longer than WAIT_IN_PLACE_SECONDS or than what is left before `deadline`
    (`time.monotonic()`). One statement; a second only when the slot is not taken."""
    if not enabled():
        return
    wait = WAIT_IN_PLACE_SECONDS if deadline is None else min(WAIT_IN_PLACE_SECONDS, deadline - time.monotonic())
    params: dict[str, str | int] = {"pair": pair, "iv": interval_us(), "wait": max(0, int(wait * 1_000_000))}
    delay = _first_slot(_TAKE, params, what) - time.monotonic()
    if delay > 0:
        time.sleep(delay)


class Reservation:
    """Consecutive slots of a pair's grid taken at once by one delivery for the calls of its Semrush phase
    (`reserve`): each of its calls goes at its own slot (`use`), none waits in line again behind the fleet's
    other calls, so a delivery that has started its phase finishes it at the budget's pace instead of being
    handed back half-way and repeating its reads when it resumes. A call beyond them (a workspace's first job
    creating its tags, a retry) reserves one more slot at the end of the line and waits for it, as long as the
    first could have waited (`latest`); the time it waits (`waited`) is not counted against the caller's write
    deadline. Further than that: `OverBudget`, nothing sent."""

    def __init__(self, slots: list[float], *, pair: str | None = None, latest: float | None = None):
        self._slots = slots  # `time.monotonic()` of each slot, in order
        self.pair, self.latest = pair, latest
        self.waited = 0.0
        # How late a call may go after its slot (`LATE_MARGIN_INTERVALS`). Never under LATE_MARGIN_FLOOR_SECONDS: a
        # call always goes a little after its slot (the thread's wake-up, the write's fence), and a budget of
        # hundreds a second has intervals of a few milliseconds.
        self.margin = (
            max(LATE_MARGIN_INTERVALS * interval_us() / 1_000_000, LATE_MARGIN_FLOOR_SECONDS)
            if enabled()
            else float("inf")
        )

    def is_late(self, due: float) -> bool:
        """Whether a call whose slot was due at `due` (`use`'s answer) would go too late now: more than `margin` after
        its slot, whatever made it late (a wait for the database or the CPU, or its delivery's previous call
        answering slowly). Sent, it would be counted by Semrush in the second of the slots after it."""
        return time.monotonic() - due > self.margin

    def starts_in(self) -> float:
        """Seconds until its next slot (0 when due, or when it has none left)."""
        return max(0.0, self._slots[0] - time.monotonic()) if self._slots else 0.0

    def left(self) -> int:
        return len(self._slots)

    def covers(self) -> bool:
        """Whether the next call goes through it (`use`): a slot left, or one more may be reserved."""
        return bool(self._slots) or (self.pair is not None and self.latest is not None)

    def retake(self) -> float:
        """The call at hand found its slot past its margin (`is_late`): this reservation's slots left are no better
        (consecutive, they are as stale, and a stale slot's call goes at once, in the seconds of the slots after
        it). Its call and every call still reserved move to the end of the line together: as many fresh
        consecutive slots, reserved at once (the stale ones left unused), waited for as long as the first could
        have waited (`latest`; further: `OverBudget`, nothing sent). Sleep until the first, return its due time."""
        if self.pair is None or self.latest is None:
            return self.use()
        calls = 1 + len(self._slots)
        moved = reserve(self.pair, calls, wait=max(0.0, self.latest - time.monotonic()), what="semrush (late)")
        self._slots = moved._slots or [time.monotonic()] * calls
        due = self._slots.pop(0)
        delay = due - time.monotonic()
        self.waited += max(0.0, delay)
        if delay > 0:
            time.sleep(delay)
        return due

    def use(self) -> float:
        """Take the next slot, reserved or one more: sleep until it (no database connection held), then return its
        due time (`time.monotonic()`; the caller sends)."""
        if self._slots:
            due = self._slots.pop(0)
            delay = due - time.monotonic()
        else:
            assert self.pair is not None and self.latest is not None, "use() past a reservation that covers nothing"
            more = reserve(self.pair, 1, wait=max(0.0, self.latest - time.monotonic()), what="semrush (one more)")
            due = more._slots[0] if more._slots else time.monotonic()
            delay = due - time.monotonic()
            self.waited += max(0.0, delay)
        if delay > 0:
            time.sleep(delay)
        return due


def reserve(pair: str, calls: int, *, wait: float, what: str = "semrush") -> Reservation:
    """`calls` consecutive slots of `pair`'s budget, the first at most `wait` seconds away (the caller waits for
    it, `Reservation.starts_in`, and each call then `use`s its slot). Raises `OverBudget` (its `retry_after` the
    seconds until a slot would be free), taking nothing, when the first is further. One statement; a second only
    when nothing is taken. Without the budget (`enabled`), a reservation of no slot: every call then goes as
    `take_slot` lets it."""
    if not enabled() or calls <= 0:
        return Reservation([])  # covers nothing: each call goes as `take_slot` lets it
    params: dict[str, str | int] = {
        "pair": pair,
        "iv": interval_us(),
        "n": calls,
        "wait": max(0, int(wait * 1_000_000)),
    }
    first = _first_slot(_RESERVE, params, what)
    slots = [first + i * interval_us() / 1_000_000 for i in range(calls)]
    return Reservation(slots, pair=pair, latest=time.monotonic() + wait)


def _first_slot(statement: str, params: dict[str, str | int], what: str) -> float:
    """Run `_TAKE` or `_RESERVE` and return the first slot it took, on this process's clock (`time.monotonic()`,
    through `_clock`). Raises `OverBudget`, nothing taken, when that slot is further than the wait: then a second
    statement reads how long until a slot would be free (the rare path). No database connection is held after it:
    neither the wait nor the call holds one."""
    with connection.cursor() as cursor:
        sent = time.monotonic()
        cursor.execute(statement, params)
        row = cursor.fetchone()
        received = time.monotonic()
        if row is None:
            cursor.execute(_WAIT, params)
            waiting = cursor.fetchone()
    release_pooled_connection()
    if row is None:
        retry_after = max(0.0, (waiting[0] if waiting else 0) / 1_000_000)
        raise OverBudget(
            f"{what}: over the fleet's Semrush rate budget for {retry_after:.1f}s", retry_after=retry_after
        )
    first_us, now_us = row
    return first_us / 1_000_000 - _clock.offset(sent, received, now_us)


def pause(pair: str, retry_after: float | None) -> None:
    """Semrush answered 429: no process sends for `pair` before its Retry-After has passed (at most
    JOB_THROTTLE_MAX_DELAY_SECONDS, the longest any throttled job waits before it tries again)."""
    if not enabled():
        return
    seconds = PAUSE_WITHOUT_RETRY_AFTER_SECONDS if retry_after is None else retry_after
    seconds = min(seconds, settings.JOB_THROTTLE_MAX_DELAY_SECONDS)
    with connection.cursor() as cursor:
        cursor.execute(_PAUSE, {"pair": pair, "pause": int(seconds * 1_000_000)})
    release_pooled_connection()
