"""A worker asks SQS for no more generation messages than the fleet's DRS budget has places for.

The claim decides the budget exactly (`jobs/leases.py` `in_flight_rule`), and a delivery over it is held back:
acknowledged and sent again JOB_FAIR_HOLD_SECONDS later. Under a burst far above the budget (2,000 jobs queued
for 200 places) that alone would recirculate every waiting message every JOB_FAIR_HOLD_SECONDS, each time a
receive, a claim taking the fleet-wide budget lock, a delete and a send, all for nothing; the claims queue on
that lock and on the database pool, and the deliveries that could run wait behind them.

So each worker process also reads, twice a second on a thread of its own, how many places the budget has free
(`leases.in_flight_free`, one COUNT bounded by the budget) and its share of them (divided by the live workers on
the job queue, from their heartbeats, rounded up), and its receive loop asks SQS for at most that many job
messages, and for none while there is no place (kombu's own "cannot consume" path: the loop looks again
after SQS_POLLING_INTERVAL). Messages not asked for stay in SQS, unreceived: no receive counts towards the
DLQ, nothing is sent again. Each receive's count is taken off the reading until the next one.

The reading is a hint, never the rule: processes whose shares round up, or read between two claims, may
together receive more, which the claim then holds back as before. When it cannot be read (the database
unreachable) or is older than STALE_AFTER_SECONDS, and whenever the budget is off or the database is not
PostgreSQL (the embedded run, one process), the loop receives as it always did. The maintenance queue is never
gated.

kombu has no hook for this: `install` wraps `kombu.transport.SQS.Channel._get_bulk_async`, the one place its
receive loop decides how many messages to ask for (kombu is pinned in requirements/base.txt).
"""

import logging
import math
import threading
import time
from typing import Any

from celery import bootsteps
from celery.worker import state as worker_state
from django.conf import settings
from django.db import connection
from kombu.transport import SQS
from vine import ensure_promise

from jobs.leases import in_flight_free
from jobs.messages import RUN_TASK
from jobs.selectors import workers_alive
from jobs.services.runner import active_deliveries

log = logging.getLogger(__name__)

READ_EVERY_SECONDS = 0.5
# A reading older than this (its thread stuck on the database) no longer limits the receives.
STALE_AFTER_SECONDS = 3.0


class BudgetReading:
    """The free places of the fleet's DRS budget, as last read, less what this process has asked for since."""

    def __init__(self) -> None:
        self._free: int | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drs-budget-reading", daemon=True)

    def start(self) -> None:
        """Read once before the receive loop's first receive (which would otherwise ask for a whole batch per
        free thread), then twice a second on the reading's own thread."""
        self.read()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def allowance(self) -> int | None:
        """How many job messages a receive may ask for now; None: no limit. The deliveries this process has
        received and not yet claimed count against it: they will take places the reading still saw free."""
        with self._lock:
            if self._free is None or time.monotonic() - self._read_at > STALE_AFTER_SECONDS:
                return None
            return max(0, self._free - unclaimed_deliveries())

    def took(self, count: int) -> None:
        with self._lock:
            if self._free is not None:
                self._free = max(0, self._free - count)

    def read(self) -> None:
        try:
            free = in_flight_free()
            if free:  # this process's share: the live workers on the job queue read the same places
                free = math.ceil(free / max(1, workers_alive(settings.MARKET_JOBS_QUEUE)))
        except Exception as exc:  # the database unreachable: receive as usual until it answers again
            if self._free is not None:
                log.warning("DRS budget not read; receiving without its limit", extra={"reason": type(exc).__name__})
            free = None
        finally:
            connection.close()  # the pool's connection back between readings
        with self._lock:
            self._free, self._read_at = free, time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(READ_EVERY_SECONDS):
            self.read()


def unclaimed_deliveries() -> int:
    """Job deliveries this process holds (received, queued or running) that have no claim yet."""
    received = sum(1 for request in list(worker_state.reserved_requests) if request.name == RUN_TASK)
    return max(0, received - len(active_deliveries()))


_reading: BudgetReading | None = None
# Receives of job messages not asked for, the budget full, since the process started (what tests observe).
withheld = 0
# kombu's own, untyped.
_original_get_bulk_async = SQS.Channel._get_bulk_async  # type: ignore[attr-defined]


def _get_bulk_async(self: Any, queue: str, callback: Any = None) -> Any:
    reading = _reading
    allowed = reading.allowance() if reading is not None and queue == settings.MARKET_JOBS_QUEUE else None
    if reading is None or allowed is None:
        return _original_get_bulk_async(self, queue, callback=callback)
    count = min(self._get_message_estimate(), allowed)
    if not count:  # as kombu does when its QoS cannot consume: no receive, the loop looks again later
        global withheld
        withheld += 1
        callback = ensure_promise(callback)
        callback([])
        return callback
    reading.took(count)
    return self._get_async(queue, count, callback=callback)


def install() -> None:
    """Route kombu's SQS receives through the budget's reading (idempotent)."""
    SQS.Channel._get_bulk_async = _get_bulk_async  # type: ignore[attr-defined]


def gated() -> bool:
    return settings.DRS_MAX_IN_FLIGHT > 0 and connection.vendor == "postgresql"


class BudgetIntakeStep(bootsteps.StartStopStep):
    """The consumer bootstep that keeps this process's reading of the DRS budget while its consumer runs."""

    requires = ("celery.worker.consumer.tasks:Tasks",)
    label = "DRS budget intake"

    def start(self, c: Any) -> None:
        global _reading
        if not gated() or _reading is not None:
            return
        install()
        _reading = BudgetReading()
        _reading.start()

    def stop(self, c: Any) -> None:
        global _reading
        reading, _reading = _reading, None
        if reading is not None:
            reading.stop()

    shutdown = stop
