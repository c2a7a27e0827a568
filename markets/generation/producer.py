"""The one producer of market-generation jobs, shared by the three entry points and regeneration (SPEC §4); what a
request acts with in Semrush (`Generation`) is markets/credentials.py.

It never fails the entry point: every refusal or failure is logged with its reason and answered with
`None` (no handle for that market). Which job a market already has (an entry point's 409) is a read:
markets/generation/selectors.py, `market_generation_job`.
"""

import enum
import logging

from django.conf import settings
from django.utils import timezone

from jobs import readiness
from jobs import services as job_services
from jobs.models import AsyncJob
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
    if market.generation_not_enqueued:  # a job now exists: the earlier failure to enqueue needs no one any more
        Market.objects.filter(id=market.id).update(generation_not_enqueued=None, generation_not_enqueued_at=None)
        market.generation_not_enqueued = market.generation_not_enqueued_at = None
    return {"jobId": enqueued.job_id, "status": "provisioning", "reused": enqueued.reused}


# Refusals that are a failure of the generation the user asked for, not the environment's choice (no consumer wired,
# no Semrush pair asked for, nothing to generate from): the entry point's 201 says so in a failed handle, and the
# market is marked for the doctor. Its recovery is the user's regeneration (a fresh credential and seeds).
FAILED_ENQUEUES = frozenset(
    {
        NotEnqueued.CATALOGUE_UNREADABLE,
        NotEnqueued.TOKEN_ALREADY_GRANTED,
        NotEnqueued.INVALID_PROMISE_TOKEN,
        NotEnqueued.IMS_MINT_FAILED,
        NotEnqueued.ENQUEUE_FAILED,
    }
)


def market_generation_not_enqueued(*, brand: Brand, market: Market, code: str) -> dict:
    """Mark `market` as one whose generation could not be enqueued (for `code`) and return the entry point's failed
    handle `{jobId, status: "failed", code, reused: false}`; `jobId` names the job when one exists (FAILED
    ENQUEUE_FAILED), else null."""
    Market.objects.filter(id=market.id).update(generation_not_enqueued=code, generation_not_enqueued_at=timezone.now())
    job_id = generation_job_id(brand.id, market.geo_target_id, market.language_code)
    exists = AsyncJob.objects.filter(id=job_id).exists()
    return {"jobId": str(job_id) if exists else None, "status": "failed", "code": code, "reused": False}


def market_generation_enqueue(
    *, caller: Caller, brand: Brand, market: Market, generation: Generation, deadline: float | None = None
) -> dict | None:
    """The entry points' producer: the handle; a failed handle when the generation could not be enqueued
    (`FAILED_ENQUEUES`, the market marked for the doctor); None when no job was queued by design (the reason logged;
    an enqueue failure never fails an entry point)."""
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
        if refused.reason in FAILED_ENQUEUES:
            return market_generation_not_enqueued(brand=brand, market=market, code=refused.reason.value)
        return None
