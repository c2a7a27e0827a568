"""Deleting a market (SPEC §3.1, the original's deleteMarket): idempotent; its Semrush project first, then its row;
a prompt generation in flight is cancelled, never raced.

1. No market for the slice: nothing to do (the caller answers 204, as for a market deleted before).
2. In one transaction, hold the market (`fence.market_hold`) and cancel its generation job (`job_cancel`): from
   the commit no generation write passes the fence, and the job has ended FAILED MARKET_DELETED, its grant deleted
   with it, its lease cleared (the delivery running it stops at its next fenced write: a DRS result is discarded,
   a rotated token invalidated), the history naming who deleted it; its token is invalidated at IMS right after.
   Another delete holding the market: this one waits for it to end: the row gone (done), or the hold given back
   (then it holds the market itself).
3. Wait until the generation write the fence let through before the hold, if any, has ended
   (`fence.writes_drained`): a request that got through reaches Semrush before the project is deleted.
4. Delete the Semrush project; Semrush not having it (404) is success. A failure gives the hold back and keeps
   the row: 502 (the original's answer), or Semrush's 401/403 for a credential it refused.
5. Delete the row.

The generation stays cancelled when the delete fails after step 2 (the request asked to stop it): the market
keeps its row and can be generated again (`POST …/markets/{marketId}/generation`). No transaction is held
across any network call.
"""

import logging
import math
import time
import uuid

from django.db import transaction
from django.utils import timezone

from jobs import services as job_services
from markets import geo
from markets.clients.semrush import SemrushClient
from markets.deadlines import request_deadline
from markets.exceptions import DeleteNotFinished, semrush_failed
from markets.generation import fence
from markets.generation.jobtype import MARKET_DELETED, generation_job_id
from markets.models import Brand, Market
from serenity.auth import Caller
from serenity.clients.http import ClientError
from serenity.db import release_pooled_connection

log = logging.getLogger(__name__)

# The time kept back from the request's budget for the Semrush delete itself.
UPSTREAM_SECONDS = 3.0


def market_delete(*, caller: Caller, brand: Brand, geo_target_id: int, language_code: str, semrush_bearer: str) -> None:
    """Delete the brand's market of one slice, if it has one (the steps above). Raises DeleteNotFinished (503,
    nothing deleted, send it again), SemrushUnavailable (502) or SemrushRefused / SemrushForbidden (401 / 403),
    the row kept in each case."""
    deadline = request_deadline()
    while True:
        market = _market(brand, geo_target_id, language_code)
        if market is None:
            return
        hold = _hold_and_cancel(caller=caller, brand=brand, market=market)
        if hold is not None:
            break
        if not _other_delete_ended(market.id, until=deadline - UPSTREAM_SECONDS):
            raise DeleteNotFinished("Another delete of this market is under way; send the delete again.")
    try:
        if not fence.writes_drained(market.id, until=deadline - UPSTREAM_SECONDS):
            raise DeleteNotFinished(
                "A prompt generation write to this market is still in flight; send the delete again.",
                headers={"Retry-After": str(_seconds_until_written(market.id))},
            )
        _delete_project(brand=brand, market=market, semrush_bearer=semrush_bearer, deadline=deadline)
    except BaseException:
        fence.market_release(market.id, hold)
        raise
    Market.objects.filter(id=market.id, deletion_hold=hold).delete()
    log.info("market deleted", extra={"market_id": str(market.id), "brand_id": str(brand.id)})


def _market(brand: Brand, geo_target_id: int, language_code: str) -> Market | None:
    """The brand's market of the slice; a geo target id that is no country's names none."""
    if geo_target_id not in geo.COUNTRY_GEO_TARGET_IDS:
        return None
    return Market.objects.filter(brand=brand, geo_target_id=geo_target_id, language_code=language_code).first()


def _hold_and_cancel(*, caller: Caller, brand: Brand, market: Market) -> uuid.UUID | None:
    """Step 2: the hold's token, or None when another delete holds the market. The cancellation names the market
    (the job of an earlier market of the slice is not this one's)."""
    with transaction.atomic():
        hold = fence.market_hold(market.id)
        if hold is not None:
            job_services.job_cancel(
                generation_job_id(brand.id, market.geo_target_id, market.language_code),
                code=MARKET_DELETED,
                reason=f"The market {market} was deleted by {caller.user_id}.",
                actor=caller.user_id,
                extra_filter={"params__marketId": str(market.id)},
            )
    return hold


def _other_delete_ended(market_id: uuid.UUID, *, until: float) -> bool:
    """Wait for the delete holding the market to end: its row gone, or its hold given back (or expired). False
    when it still holds the market at `until` (a `time.monotonic()` value)."""
    while True:
        held = Market.objects.filter(id=market_id).exclude(fence.market_open_q()).exists()
        release_pooled_connection()
        if not held:
            return True
        if time.monotonic() + fence.LOOK_AGAIN_SECONDS >= until:
            return False
        time.sleep(fence.LOOK_AGAIN_SECONDS)


def _seconds_until_written(market_id: uuid.UUID) -> int:
    """Whole seconds until the write in flight ends at the latest (its record's end), at least 1."""
    until = Market.objects.filter(id=market_id).values_list("generation_write_until", flat=True).first()
    return max(1, math.ceil((until - timezone.now()).total_seconds())) if until else 1


def _delete_project(*, brand: Brand, market: Market, semrush_bearer: str, deadline: float) -> None:
    """Step 4. A market without a project (never made) has nothing in Semrush."""
    if not (market.semrush_project_id and brand.semrush_workspace_id):
        return
    try:
        deleted = SemrushClient(semrush_bearer, deadline=deadline).delete_project(
            workspace_id=brand.semrush_workspace_id, project_id=market.semrush_project_id
        )
    except ClientError as exc:
        log.warning(
            "market not deleted: its Semrush project was not",
            extra={"market_id": str(market.id), "reason": type(exc).__name__, "status": exc.status},
        )
        raise semrush_failed(exc, f"{market} could not be deleted in Semrush; retry later.") from None
    if not deleted:
        log.info("market's Semrush project already gone", extra={"market_id": str(market.id)})
