"""The one producer of market-generation jobs, shared by the three entry points and regeneration (SPEC §4); what a
request acts with in Semrush (`Generation`) is markets/credentials.py.

It never fails the entry point: every refusal or failure is logged with its reason and answered with
`None` (no handle for that market). Which job a market already has (an entry point's 409) is a read:
markets/generation/selectors.py, `market_generation_job`.
"""

import enum
import logging

from django.conf import settings

from jobs import readiness
from jobs import services as job_services
from markets.catalogue import seeds_from_catalogue
from markets.clients.semrush import SemrushClient
from markets.credentials import Generation
from markets.generation.jobtype import MARKET_GENERATION_JOB_TYPE, generation_job_id
from markets.models import Brand, Market
from serenity.auth import Caller
from serenity.clients.http import ClientError
from tokens import pairs
from tokens.services import TokenAlreadyGranted, promise_mint
from tokens.types import InvalidPromiseToken

log = logging.getLogger(__name__)


def job_params(*, brand: Brand, market: Market, seeds: list[dict]) -> dict:
    """The job's input parameters: the DRS contract's `job` object plus what the write phase needs.
    Never a token."""
    site = market.site or brand.base_site
    domain = market.domain or brand.domain
    brand_name = brand.display_name or brand.name
    # The brand's other names: its aliases and the names this market was created with.
    aliases = [n for n in dict.fromkeys([*(brand.aliases or []), *(market.brand_names or [])]) if n != brand_name]
    return {
        "siteId": str(site.id) if site else None,
        "brand": brand_name,
        "aliases": aliases,
        "baseUrl": (site.base_url if site else "") or brand.primary_url or f"https://{domain}",
        "market": market.country,
        "languageCode": market.language_code,
        "count": settings.DRS_NUM_PROMPTS,
        "seeds": seeds,
        "imsOrgId": brand.organization.ims_org_id,
        "brandId": str(brand.id),
        "marketId": str(market.id),
        "geoTargetId": market.geo_target_id,
        "workspaceId": brand.semrush_workspace_id,
        "domain": domain,
    }


class NotEnqueued(enum.StrEnum):
    """Why a market got no generation job (the entry points log it and answer the market without a
    handle; the regeneration endpoint answers it as a problem)."""

    CONSUMER_NOT_READY = "CONSUMER_NOT_READY"
    PROMISE_PAIR_REQUIRED = "PROMISE_PAIR_REQUIRED"
    CATALOGUE_UNREADABLE = "CATALOGUE_UNREADABLE"
    NO_SEEDS = "NO_SEEDS"
    TOKEN_ALREADY_GRANTED = "TOKEN_ALREADY_GRANTED"
    INVALID_PROMISE_TOKEN = "INVALID_PROMISE_TOKEN"
    IMS_MINT_FAILED = "IMS_MINT_FAILED"
    ENQUEUE_FAILED = "ENQUEUE_FAILED"


class ProducerRefused(Exception):
    """No job was queued, for `reason` (the cause, when there is one, chained)."""

    def __init__(self, reason: NotEnqueued, cause: Exception | None = None):
        super().__init__(reason.value)
        self.reason = reason
        self.cause = cause


def market_generation_produce(
    *, caller: Caller, brand: Brand, market: Market, generation: Generation, deadline: float | None = None
) -> dict:
    """Enqueue (or reuse) the generation job of a market. Returns the handle
    `{jobId, status: "provisioning", reused}`; raises ProducerRefused saying why no job was queued.

    1. Readiness gate (SSM, cached). 2. Only the Semrush pair, before anything is minted. 3. Seeds from
    the catalogue with the request's Semrush bearer (read afresh each time: it may have changed). 4. The
    deterministic job id. 5. job_services.job_enqueue: dedupe (a live job is reused, a finished one
    replaced under the same id), fail-closed credential (the promise token IMS rotated for the request, once,
    else a mint from the request's IMS access token), grant, send after commit.
    """
    pair = generation.pair
    if not readiness.consumer_ready():
        raise ProducerRefused(NotEnqueued.CONSUMER_NOT_READY)
    if pair is None or pair.name != pairs.SEMRUSH:
        raise ProducerRefused(NotEnqueued.PROMISE_PAIR_REQUIRED)
    try:
        items = SemrushClient(generation.credential.semrush_bearer, deadline=deadline).brand_topics(
            workspace_id=brand.semrush_workspace_id, domain=market.domain or brand.domain, country=market.country
        )
    except ClientError as exc:
        raise ProducerRefused(NotEnqueued.CATALOGUE_UNREADABLE, exc) from exc
    seeds = seeds_from_catalogue(items)
    if not seeds:
        raise ProducerRefused(NotEnqueued.NO_SEEDS)
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
            obtain_token=lambda: (
                generation.credential.take_promise()
                or promise_mint(bearer=generation.credential.mint_bearer, pair=pair)
            ),
        )
    except TokenAlreadyGranted as exc:
        raise ProducerRefused(NotEnqueued.TOKEN_ALREADY_GRANTED, exc) from exc
    except InvalidPromiseToken as exc:
        raise ProducerRefused(NotEnqueued.INVALID_PROMISE_TOKEN, exc) from exc
    except ClientError as exc:
        raise ProducerRefused(NotEnqueued.IMS_MINT_FAILED, exc) from exc
    if not enqueued.reused and not enqueued.sent:
        raise ProducerRefused(NotEnqueued.ENQUEUE_FAILED)
    return {"jobId": enqueued.job_id, "status": "provisioning", "reused": enqueued.reused}


def market_generation_enqueue(
    *, caller: Caller, brand: Brand, market: Market, generation: Generation, deadline: float | None = None
) -> dict | None:
    """The entry points' producer: the handle, or None when no job was queued (the reason logged; an
    enqueue failure never fails an entry point)."""
    try:
        return market_generation_produce(
            caller=caller, brand=brand, market=market, generation=generation, deadline=deadline
        )
    except ProducerRefused as refused:
        extra = {"market_id": str(market.id), "brand_id": str(brand.id), "reason": refused.reason.value}
        if refused.cause is not None:
            extra["error_class"] = type(refused.cause).__name__
        # The readiness gate logs "not ready" itself, at info: an environment without a consumer is normal.
        level = logging.INFO if refused.reason == NotEnqueued.CONSUMER_NOT_READY else logging.WARNING
        log.log(level, "prompt generation not enqueued", extra=extra)
        return None
