"""The one producer of market-generation jobs, shared by the three entry points (SPEC §4).

It never fails the entry point: every refusal or failure is logged with its reason and answered with
`None` (no handle for that market).
"""
import enum
import logging
from dataclasses import dataclass

from django.conf import settings

from jobs import readiness
from jobs import services as job_services
from markets.clients.semrush import SemrushClient
from markets.constants import MARKET_GENERATION_JOB_TYPE
from markets.jobid import generation_job_id
from markets.models import Brand, Market
from markets.seeds import seeds_from_catalogue
from serenity.auth import Caller
from serenity.clients.http import ClientError
from tokens import pairs
from tokens.services import TokenAlreadyGranted, promise_mint
from tokens.types import InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)


@dataclass
class Generation:
    """How a request wants prompts: the async producer (flag on + generatePrompts) or the old path.

    `forwarded` is the browser's promise token, already checked with IMS. A token has one owner, so it
    serves at most one job of the request: `take_forwarded()` hands it out once; every other new job of
    the request mints its own from the caller's bearer."""

    use_async: bool
    pair: pairs.ClientPair | None = None
    forwarded: PromiseToken | None = None

    def take_forwarded(self) -> PromiseToken | None:
        token, self.forwarded = self.forwarded, None
        return token



def job_params(*, brand: Brand, market: Market, seeds: list[dict]) -> dict:
    """The job's input parameters: the DRS contract's `job` object plus what the write phase needs.
    Never a token."""
    site = market.site or brand.base_site
    return {
        "siteId": str(site.id) if site else None,
        "brand": brand.display_name or brand.name,
        "aliases": list(brand.aliases or []),
        "baseUrl": brand.primary_url or (site.base_url if site else f"https://{brand.domain}"),
        "market": market.country,
        "languageCode": market.language_code,
        "count": settings.DRS_NUM_PROMPTS,
        "seeds": seeds,
        "imsOrgId": brand.organization.ims_org_id,
        "brandId": str(brand.id),
        "marketId": str(market.id),
        "geoTargetId": market.geo_target_id,
        "workspaceId": brand.semrush_workspace_id,
        "domain": brand.domain,
    }


class NotEnqueued(enum.StrEnum):
    """Why a new market got no generation job (the `reason` of the log line; the entry point still answers
    with the market, without a handle)."""

    CONSUMER_NOT_READY = "CONSUMER_NOT_READY"  # logged by the readiness gate itself, at info
    PROMISE_PAIR_REQUIRED = "PROMISE_PAIR_REQUIRED"
    CATALOGUE_UNREADABLE = "CATALOGUE_UNREADABLE"
    NO_SEEDS = "NO_SEEDS"
    TOKEN_ALREADY_GRANTED = "TOKEN_ALREADY_GRANTED"
    INVALID_PROMISE_TOKEN = "INVALID_PROMISE_TOKEN"
    IMS_MINT_FAILED = "IMS_MINT_FAILED"
    ENQUEUE_FAILED = "ENQUEUE_FAILED"


def _not_enqueued(reason: NotEnqueued, where: dict, exc: Exception | None = None) -> None:
    extra = {**where, "reason": reason.value}
    if exc is not None:
        extra["error_class"] = type(exc).__name__
    log.warning("prompt generation not enqueued", extra=extra)


def market_generation_enqueue(*, caller: Caller, brand: Brand, market: Market, generation: Generation,
                              deadline: float | None = None) -> dict | None:
    """Enqueue (or reuse) the generation job of a new market. Returns the response handle
    `{jobId, status: "provisioning", reused}`, or None when no job was queued (reason logged, NotEnqueued).

    1. Readiness gate (SSM, cached). 2. Only the Semrush pair, before anything is minted. 3. Seeds from
    the catalogue with the caller's token. 4. The deterministic job id. 5. job_services.job_enqueue: dedupe,
    fail-closed credential (the request's forwarded token once, else a mint), grant, send after commit.
    """
    where = {"market_id": str(market.id), "brand_id": str(brand.id)}
    pair = generation.pair
    if not readiness.consumer_ready():
        return None
    if pair.name != pairs.SEMRUSH:
        return _not_enqueued(NotEnqueued.PROMISE_PAIR_REQUIRED, where)
    try:
        items = SemrushClient(caller.bearer, deadline=deadline).brand_topics(
            workspace_id=brand.semrush_workspace_id, domain=brand.domain, country=market.country
        )
    except ClientError as exc:
        return _not_enqueued(NotEnqueued.CATALOGUE_UNREADABLE, where, exc)
    seeds = seeds_from_catalogue(items)
    if not seeds:
        return _not_enqueued(NotEnqueued.NO_SEEDS, where)
    job_id = generation_job_id(brand.id, market.geo_target_id, market.language_code)
    site = market.site or brand.base_site
    try:
        enqueued = job_services.job_enqueue(
            job_id=job_id,
            job_type=MARKET_GENERATION_JOB_TYPE,
            organization_id=brand.organization_id,
            brand_id=brand.id,
            site_id=site.id if site else None,
            user_id=caller.user_id,
            params=job_params(brand=brand, market=market, seeds=seeds),
            pair=pair,
            obtain_token=lambda: generation.take_forwarded() or promise_mint(bearer=caller.bearer, pair=pair),
        )
    except TokenAlreadyGranted:
        return _not_enqueued(NotEnqueued.TOKEN_ALREADY_GRANTED, where)
    except InvalidPromiseToken as exc:
        return _not_enqueued(NotEnqueued.INVALID_PROMISE_TOKEN, where, exc)
    except ClientError as exc:
        return _not_enqueued(NotEnqueued.IMS_MINT_FAILED, where, exc)
    if not enqueued.reused and not enqueued.sent:
        return _not_enqueued(NotEnqueued.ENQUEUE_FAILED, where)
    return {"jobId": enqueued.job_id, "status": "provisioning", "reused": enqueued.reused}
