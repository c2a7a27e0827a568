"""The one producer of market-generation jobs, shared by the three entry points (SPEC §4).

It never fails the entry point: every refusal or failure is logged with its reason and answered with
`None` (no handle for that market).
"""
import logging
from typing import TYPE_CHECKING

from django.conf import settings

from jobs import readiness
from jobs import services as jobs
from markets.clients.semrush import SemrushClient
from markets.constants import MARKET_GENERATION_JOB_TYPE
from markets.jobid import generation_job_id
from markets.models import Brand, Market
from markets.seeds import seeds_from_catalogue
from serenity.auth import Caller
from serenity.clients.http import ClientError
from tokens import pairs
from tokens.services import TokenAlreadyGranted, promise_mint
from tokens.types import InvalidPromiseToken

if TYPE_CHECKING:
    from markets.services import Generation

log = logging.getLogger(__name__)


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


def market_generation_enqueue(*, caller: Caller, brand: Brand, market: Market, generation: "Generation") -> dict | None:
    """Enqueue (or reuse) the generation job of a new market. Returns the response handle
    `{jobId, status: "provisioning", reused}`, or None when no job was queued (reason logged).

    1. Readiness gate (SSM, cached). 2. Seeds from the catalogue with the caller's token. 3. The
    deterministic job id. 4-6. jobs.job_enqueue: dedupe, fail-closed credential, grant, send after commit.
    """
    where = {"market_id": str(market.id), "brand_id": str(brand.id)}
    pair = generation.pair
    if not readiness.consumer_ready():
        return None
    if pair.name != pairs.SEMRUSH:
        log.warning("prompt generation not enqueued", extra={**where, "reason": "PROMISE_PAIR_REQUIRED"})
        return None
    try:
        items = SemrushClient(caller.bearer).brand_topics(
            workspace_id=brand.semrush_workspace_id, domain=brand.domain, country=market.country
        )
    except ClientError as exc:
        log.warning("prompt generation not enqueued", extra={**where, "reason": f"catalogue:{type(exc).__name__}"})
        return None
    seeds = seeds_from_catalogue(items)
    if not seeds:
        log.warning("prompt generation not enqueued", extra={**where, "reason": "NO_SEEDS"})
        return None
    job_id = generation_job_id(brand.id, market.geo_target_id, market.language_code)
    site = market.site or brand.base_site
    try:
        enqueued = jobs.job_enqueue(
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
        log.warning("prompt generation not enqueued", extra={**where, "reason": "TOKEN_ALREADY_GRANTED"})
        return None
    except InvalidPromiseToken:
        log.warning("prompt generation not enqueued", extra={**where, "reason": InvalidPromiseToken.code})
        return None
    except ClientError as exc:
        log.warning("prompt generation not enqueued", extra={**where, "reason": f"ims_mint:{type(exc).__name__}"})
        return None
    if enqueued.sent is False:
        log.warning("prompt generation not enqueued", extra={**where, "reason": "ENQUEUE_FAILED"})
        return None
    return {"jobId": enqueued.job_id, "status": "provisioning", "reused": enqueued.reused}
