"""Market provisioning (createMarket, and each market of createBrand and activateMarkets; SPEC §3): the brand's
Semrush sub-workspace, then per market its row, its Semrush project, published, and its prompts (the producer,
SPEC §4, or the old synchronous path, §8).

Network calls (Semrush, the producer) happen after the rows they belong to are committed, never inside a
transaction; a market whose Semrush project cannot be made is removed again, so a retry of the same slice
is not answered 409.
"""

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from markets import geo
from markets.clients.semrush import SemrushClient
from markets.credentials import Generation
from markets.deadlines import in_parallel, request_deadline
from markets.exceptions import InvalidRequest, MarketExists, NotAttempted, UnknownLanguage, semrush_failed
from markets.generation.producer import NotEnqueued, market_generation_enqueue, market_generation_not_enqueued
from markets.generation.selectors import market_generation_job
from markets.models import Brand, Market, Site
from markets.onboarding.inputs import UUID, MarketRequest, host_of
from markets.onboarding.sync_prompts import SyncBudget, sync_prompts_write
from serenity.auth import Caller
from serenity.clients.http import ClientError
from serenity.problems import DomainError, problem

log = logging.getLogger(__name__)

# The least time worth starting a market with: a project lookup or creation, a publish and the producer.
MARKET_MIN_SECONDS = 3.0


@dataclass
class MarketOutcome:
    """What became of one market of a request: `status` 201 (created), 409 (already live), 400 (the entry
    broke a rule), 502 (Semrush failed) or 503 (not attempted in time), with the market or a problem."""

    market_as_sent: object
    language_as_sent: object
    status: int
    market: Market | None = None
    problem: dict | None = None
    prompt_generation: dict | None = None
    sync_prompts: dict | None = None


def brand_ensure_workspace(*, brand: Brand, semrush_bearer: str) -> Brand:
    """Provision the brand's Semrush sub-workspace unless it has one. Raises SemrushUnavailable, or SemrushRefused
    when Semrush refused the request's credential."""
    if brand.semrush_workspace_id:
        return brand
    try:
        workspace = SemrushClient(semrush_bearer).create_workspace(
            name=brand.display_name or brand.name, parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID
        )
    except ClientError as exc:
        log.warning("semrush workspace not created", extra={"brand_id": str(brand.id), "reason": type(exc).__name__})
        raise semrush_failed(exc, "The brand's Semrush workspace could not be created.") from None
    # Conditional: of two requests provisioning at once, the first stored workspace stays the brand's.
    Brand.objects.filter(id=brand.id, semrush_workspace_id__isnull=True).update(
        semrush_workspace_id=workspace, workspace_provisioned_at=timezone.now()
    )
    brand.refresh_from_db(fields=["semrush_workspace_id", "workspace_provisioned_at"])
    return brand


def market_site(*, brand: Brand, request: MarketRequest) -> Site | None:
    """The site a market is created on: the one `siteId` names (a site of the brand, or of its organization
    and no other brand), else the brand's base site. Raises InvalidRequest for a `siteId` that names none,
    as the original (whether it is unknown or not the caller's, the same answer)."""
    if request.site_id is None:
        return brand.base_site
    site = None
    if UUID.fullmatch(request.site_id):
        site = Site.objects.filter(
            Q(brand=brand) | Q(brand__isnull=True), id=request.site_id, organization_id=brand.organization_id
        ).first()
    if site is None:
        raise InvalidRequest(
            [{"pointer": "/siteId", "code": "invalid", "message": "siteId did not resolve to a site domain"}]
        )
    return site


def markets_provision(
    *,
    caller: Caller,
    brand: Brand,
    requests: list[MarketRequest],
    sites: list[Site | None],
    generation: Generation,
    deadline: float | None = None,
) -> list[MarketOutcome]:
    """Create, set up in Semrush and publish each market, then give each new one its prompts (the producer,
    or the old path's catalogue copy).

    The markets run under one deadline (`deadline`, else REQUEST_DEADLINE_SECONDS from this call; the brand's
    sub-workspace, made before, is not under it): their Semrush calls are bounded by it, and a market not
    started while MARKET_MIN_SECONDS remain is answered 503 `not_attempted` (retryable) and not created at
    all. One SyncBudget spans the whole batch (the old path's shared write deadline,
    SYNC_WRITE_DEADLINE_SECONDS). Markets are
    provisioned MARKET_PROVISION_CONCURRENCY at a time (each is independent: its own row, project and job);
    the answer lists them in the order asked. The brand must have its sub-workspace already.
    """
    deadline = deadline or request_deadline()
    semrush = SemrushClient(generation.credential.semrush_bearer, deadline=deadline)
    budget = SyncBudget()

    def provision(pair) -> MarketOutcome:
        request, site = pair
        return _market_provision(
            caller=caller,
            brand=brand,
            request=request,
            site=site,
            generation=generation,
            semrush=semrush,
            budget=budget,
            deadline=deadline,
        )

    return in_parallel(provision, list(zip(requests, sites, strict=True)), limit=settings.MARKET_PROVISION_CONCURRENCY)


def _market_provision(
    *,
    caller: Caller,
    brand: Brand,
    request: MarketRequest,
    site: Site | None,
    generation: Generation,
    semrush: SemrushClient,
    budget: SyncBudget,
    deadline: float,
) -> MarketOutcome:
    country, language_code = request.country, request.language_code
    outcome = MarketOutcome(market_as_sent=request.market, language_as_sent=request.language, status=201)
    slice_ = f"{country}/{language_code}"
    if deadline - time.monotonic() < MARKET_MIN_SECONDS:
        return outcome_failed(
            outcome,
            NotAttempted(
                f"{slice_} was not attempted within the request's time budget; nothing was created. Send it again."
            ),
            retryable=True,
        )
    geo_target_id = geo.geo_target_id(country)
    try:
        language_supported(semrush=semrush, language_code=language_code, slice_=slice_)
    except DomainError as exc:
        return outcome_failed(outcome, exc)
    try:
        with transaction.atomic():
            market = Market.objects.create(
                brand=brand,
                site=site,
                country=country,
                language_code=language_code,
                geo_target_id=geo_target_id,
                name=request.name,
                domain=request.domain or (_site_host(site) or brand.domain),
                brand_names=request.brand_names,
                brand_display_name=request.display_name,
                model_ids=request.model_ids,
            )
    except IntegrityError:
        return _market_exists(outcome, brand, country, language_code)
    market.brand = brand
    try:
        # A new market has no project yet: create it at once (a project that exists answers 409 and is re-read).
        project = semrush.create_project(
            workspace_id=brand.semrush_workspace_id,
            geo_target_id=geo_target_id,
            language_code=language_code,
            name=request.name,
        )
        market.semrush_project_id = project["id"]
        if not generation.use_async:
            outcome.sync_prompts = sync_prompts_write(
                caller=caller,
                brand=brand,
                market=market,
                semrush_bearer=generation.credential.semrush_bearer,
                budget=budget,
            )
        semrush.publish(project_id=project["id"])
    except ClientError as exc:
        log.warning(
            "market not provisioned in Semrush; market removed",
            extra={
                "brand_id": str(brand.id),
                "market": slice_,
                "reason": type(exc).__name__,
                "detail": str(exc),
                "status": exc.status,
            },
        )
        Market.objects.filter(id=market.id).delete()
        return outcome_failed(outcome, semrush_failed(exc, f"{slice_} could not be set up in Semrush; retry later."))
    market.publish_state = Market.PublishState.PUBLISHED
    market.save(update_fields=["semrush_project_id", "publish_state", "updated_at"])
    outcome.market = market
    if generation.use_async:
        try:
            outcome.prompt_generation = market_generation_enqueue(
                caller=caller, brand=brand, market=market, generation=generation, deadline=deadline
            )
        except Exception:
            # The market is committed and published: whatever went wrong in the producer (a database
            # error, a bug), the answer is the market with a failed handle, never a 500 that hides it.
            log.exception(
                "prompt generation not enqueued", extra={"market_id": str(market.id), "reason": "producer_error"}
            )
            try:
                outcome.prompt_generation = market_generation_not_enqueued(
                    brand=brand, market=market, code=NotEnqueued.ENQUEUE_FAILED.value
                )
            except Exception:  # the database itself: the market alone, as before
                log.exception("market not marked as not enqueued", extra={"market_id": str(market.id)})
    return outcome


def _site_host(site: Site | None) -> str | None:
    return host_of(site.base_url) if site is not None else None


def outcome_failed(outcome: MarketOutcome, exc: DomainError, **extra) -> MarketOutcome:
    outcome.status = exc.status
    outcome.problem = problem(exc.status, exc.code, exc.title, exc.detail, errors=exc.errors, **extra)
    return outcome


def _market_exists(outcome: MarketOutcome, brand: Brand, country: str, language_code: str) -> MarketOutcome:
    return outcome_failed(
        outcome,
        MarketExists(f"{country}/{language_code} is already live."),
        **existing_market_handle(brand, country, language_code),
    )


def existing_market_handle(brand: Brand, country: str, language_code: str) -> dict:
    """For a 409: the live market's id and, when it has one, its generation job `{jobId, status}`, so the
    UI can poll it or offer a regeneration."""
    market = Market.objects.filter(brand=brand, country=country, language_code=language_code).first()
    if market is None:
        return {}
    handle: dict[str, Any] = {"marketId": str(market.id)}
    job = market_generation_job(brand=brand, market=market)
    if job is not None:
        handle["promptGeneration"] = job
    return handle


def language_supported(*, semrush: SemrushClient, language_code: str, slice_: str) -> None:
    """Semrush's language catalogue (read once an hour per process) has the language: its whole code or its
    primary subtag (`de-ch` -> German). Raises UnknownLanguage naming it (400, the original's "Language 'xx' not
    found"), or what a catalogue that cannot be read is answered with."""
    try:
        if geo.language_in(semrush.languages(), language_code) is None:
            raise UnknownLanguage(f"Language '{language_code}' not found")
    except ClientError as exc:
        log.warning("semrush language catalogue unreadable", extra={"reason": type(exc).__name__})
        raise semrush_failed(exc, f"{slice_} could not be set up in Semrush; retry later.") from None


def market_create(*, caller: Caller, brand: Brand, request: MarketRequest, generation: Generation) -> MarketOutcome:
    """Add one market to a brand (createMarket): on `siteId`'s site or the brand's base site, in the brand's
    sub-workspace (provisioned here if the brand has none yet, as the original does). A language Semrush does not
    support is refused before anything is made in Semrush, the sub-workspace included."""
    site = market_site(brand=brand, request=request)
    language_supported(
        semrush=SemrushClient(generation.credential.semrush_bearer, deadline=request_deadline()),
        language_code=request.language_code,
        slice_=f"{request.country}/{request.language_code}",
    )
    brand_ensure_workspace(brand=brand, semrush_bearer=generation.credential.semrush_bearer)
    (outcome,) = markets_provision(caller=caller, brand=brand, requests=[request], sites=[site], generation=generation)
    return outcome
