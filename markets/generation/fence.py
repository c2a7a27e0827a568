"""The fence between a market's prompt generation and the market's deletion (SPEC §3.1): once the delete that
cancelled a generation has answered, nothing that generation sends reaches Semrush.

Both sides meet on the market's row (`markets.models.Market`), never inside a transaction held across a call:

- **The generation.** Every Semrush write a generation job makes (a tag, a batch of prompts, a publish) passes
  `semrush_write` right before its HTTP request goes out: one conditional UPDATE of the market's row that passes
  only while the market the job names (its `marketId`) exists, no delete holds it, and the job is IN_PROGRESS under
  this delivery's live lease; it records the write as in flight until the call gives
  up (`generation_write_lease`, `generation_write_until`), and the record is cleared when the call returns.
- **The delete.** `market_hold` takes the market (one conditional UPDATE: of concurrent deletes one holds it),
  in the same transaction as the job's cancellation; from its commit no write passes the fence. Then
  `writes_drained` waits until the write the fence let through before, if any, has ended, and only then is the
  Semrush project deleted.

Both statements update the one row, so PostgreSQL orders them: a write's UPDATE that comes second re-reads the row
and finds the hold; a hold that comes second is followed by a read that finds the write's record. A request the
fence let through therefore reaches Semrush before the project is deleted (and goes with it), or not at all. What
is left is a call that outlives its record (`write_record_seconds`: each of an attempt's four waits is bounded by
its timeout), which only a worker stalled far beyond its timeouts makes; docs/worker.md ("Deleting a market while
its prompts are generated") says why even that writes nothing anyone sees.
"""

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, Q
from django.utils import timezone

from jobs.context import JobContext
from jobs.exceptions import JobFailed
from jobs.models import AsyncJob, JobStatus
from markets.generation import jobtype
from markets.models import Market
from serenity.compiled import Compiled, as_uuid, update_sql
from serenity.db import release_pooled_connection

log = logging.getLogger(__name__)

# An attempt's four waits (a pooled connection, connect, send, answer) are each bounded by its timeout; the
# clocks of the worker and the API may differ by this much.
ATTEMPT_WAITS = 4
CLOCK_MARGIN_SECONDS = 1.0
# How often a delete looks again at a write in flight or at another delete holding the market.
LOOK_AGAIN_SECONDS = 0.05


def write_record_seconds(timeout: float) -> float:
    """How long a Semrush write whose attempt has `timeout` is recorded as in flight."""
    return ATTEMPT_WAITS * timeout + CLOCK_MARGIN_SECONDS


def market_open_q(*, now: datetime | None = None) -> Q:
    """Markets no delete holds at `now` (a hold that expired counts as none: its delete died)."""
    return Q(deletion_hold__isnull=True) | Q(deletion_hold_expires_at__lte=now or timezone.now())


def _write_passes(market_id: uuid.UUID, job_id: uuid.UUID, token: uuid.UUID, now: datetime, until: datetime):
    """The write's record on the market's row, set only while the market is open and the job is IN_PROGRESS under
    the delivery's live lease (compiled once: serenity/compiled.py)."""
    running = AsyncJob.objects.filter(
        id=job_id, status=JobStatus.IN_PROGRESS, lease_token=token, lease_expires_at__gt=now
    )
    return update_sql(
        Market.objects.filter(market_open_q(now=now), Exists(running), id=market_id),
        generation_write_lease=token,
        generation_write_until=until,
    )


_WRITE_PASS = Compiled(_write_passes)
_WRITE_END = Compiled(
    lambda market_id, token: update_sql(
        Market.objects.filter(id=market_id, generation_write_lease=token),
        generation_write_lease=None,
        generation_write_until=None,
    )
)


# --- The generation's side ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def semrush_write(ctx: JobContext, *, timeout: float) -> Iterator[None]:
    """Pass the fence for one Semrush write request of `ctx`'s delivery (its attempt bounded by `timeout`), or
    raise: LeaseLost when the delivery no longer holds the job (a delete cancelled it, or another delivery took it
    over), JobFailed MARKET_DELETED when the job still is this delivery's but its market is gone or being deleted.
    The write is recorded as in flight on the market's row while the request runs; the record is cleared when it
    returns, whatever it answered."""
    market_id = as_uuid(ctx.job.params.get("marketId"))
    now = timezone.now()
    until = now + timedelta(seconds=write_record_seconds(timeout))
    passed = (
        market_id is not None
        and _WRITE_PASS.execute(
            market_id=market_id, job_id=as_uuid(ctx.job.id), token=ctx.lease_token, now=now, until=until
        )
        == 1
    )
    if not passed:
        ctx.confirm()  # LeaseLost when the lease is what failed
        if market_id is None or not Market.objects.filter(market_open_q(), id=market_id).exists():
            raise JobFailed(jobtype.MARKET_DELETED, "The market was deleted (or is being deleted) before this write.")
        # Neither, read again (the lease or the hold changed between the two reads): stop, send nothing.
        raise ctx.lost("the Semrush write fence")
    release_pooled_connection()  # the call holds no pooled database connection
    try:
        yield
    finally:
        try:
            _WRITE_END.execute(market_id=market_id, token=ctx.lease_token)
        except Exception:  # the record ends by itself at `until`; a delete waits for it until then
            log.warning("generation write record not cleared", extra={"market_id": str(market_id)}, exc_info=True)
        release_pooled_connection()


# --- The delete's side ------------------------------------------------------------------------------------------


def market_hold(market_id: uuid.UUID) -> uuid.UUID | None:
    """Hold the market for a delete: no generation write passes the fence from the commit of the caller's
    transaction on (call it inside the one that cancels the market's job). The hold ends with the market's row, by
    `market_release`, or by itself after `delete_hold_seconds()` (its delete died). Its token, or None when another
    delete holds the market (or it is gone)."""
    hold = uuid.uuid4()
    expires = timezone.now() + timedelta(seconds=delete_hold_seconds())
    held = Market.objects.filter(market_open_q(), id=market_id).update(
        deletion_hold=hold, deletion_hold_expires_at=expires
    )
    return hold if held == 1 else None


def delete_hold_seconds() -> float:
    """How long a delete holds a market at most: twice the request's time budget, which bounds every call of it."""
    return 2 * settings.REQUEST_DEADLINE_SECONDS


def market_release(market_id: uuid.UUID, hold: uuid.UUID) -> None:
    """Give the hold back (a delete that could not finish): the market is open to generation writes again."""
    Market.objects.filter(id=market_id, deletion_hold=hold).update(deletion_hold=None, deletion_hold_expires_at=None)


def writes_drained(market_id: uuid.UUID, *, until: float) -> bool:
    """Wait until no generation write of the market is in flight: the record its fence made is cleared, or has
    passed its end. False when one still is at `until` (a `time.monotonic()` value). Holds no pooled database connection
    between looks."""
    while True:
        in_flight = Market.objects.filter(
            id=market_id, generation_write_lease__isnull=False, generation_write_until__gt=timezone.now()
        ).exists()
        release_pooled_connection()
        if not in_flight:
            return True
        if time.monotonic() + LOOK_AGAIN_SECONDS >= until:
            return False
        time.sleep(LOOK_AGAIN_SECONDS)
