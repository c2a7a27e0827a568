"""Onboarding services: brands, markets and activation, as the original service's contract defines them
(SPEC §3), and the old synchronous prompt path (§8) or the producer (§4) for each new market.

Network calls (Semrush, the producer) happen after the rows they belong to are committed, never inside a
transaction; a market whose Semrush project cannot be made is removed again, so a retry of the same slice
is not answered 409, and a brand whose Semrush set-up failed on its creation is not left behind.
"""

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from markets import geo
from markets.clients.semrush import SemrushClient
from markets.credentials import Generation
from markets.deadlines import in_parallel, request_deadline
from markets.exceptions import (
    BrandDemotionRefused,
    BrandExists,
    InvalidRequest,
    MarketExists,
    NotAttempted,
    SemrushRefused,
    SemrushUnavailable,
    SerenityInactiveForOrg,
    SiteNotFound,
    UnknownLanguage,
    semrush_failed,
)
from markets.generation.producer import market_generation_enqueue
from markets.generation.selectors import market_generation_job
from markets.models import Brand, Market, Organization, Site
from markets.onboarding.inputs import (
    UUID,
    ActivateRequest,
    BrandRequest,
    MarketRequest,
    activation_market_body,
    host_of,
    market_request,
    semrush_work_errors,
)
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


# --- Brands ----------------------------------------------------------------------------------------------


@dataclass
class BrandCreated:
    brand: Brand
    market: MarketOutcome | None = None


def brand_semrush_work(*, org: Organization, request: BrandRequest) -> bool:
    """Whether a createBrand asks for work in Semrush, once it is allowed: an active brand of a Serenity
    organization gets its sub-workspace (and maybe a market). Raises what is not allowed: Semrush work (a
    market, or generation) where Serenity is not active (SerenityInactiveForOrg), or without what it needs
    (InvalidRequest). Nothing is written or called."""
    if not org.is_serenity_active and (request.market is not None or request.generate_prompts):
        raise SerenityInactiveForOrg()
    semrush_work_errors(request)
    return org.is_serenity_active and request.status == Brand.Status.ACTIVE


def brand_create(
    *, caller: Caller, org: Organization, request: BrandRequest, generation: Generation | None
) -> BrandCreated:
    """Create a brand, or update the organization's brand of that name (createBrand is an upsert, as in the
    original), with its base site.

    1. What brand_semrush_work refuses. `generation` (what the request acts in Semrush with) is given when
       brand_semrush_work said there is Semrush work.
    2. The row, in one transaction. An active brand is never made pending again (BrandDemotionRefused);
       a domain another brand of the organization holds is refused (BrandExists).
    3. Serenity organization and an active brand: its Semrush sub-workspace (once) and, with `semrushMarket`,
       its first market. If either fails for a brand this request created, the brand is removed again and
       SemrushUnavailable, SemrushRefused or FirstMarketFailed (carrying the market's problem) raised.
    A pending brand gets nothing in Semrush until it is activated.
    """
    semrush_work = brand_semrush_work(org=org, request=request)
    market_request_ = None
    if request.market is not None and semrush_work:
        market_request_ = market_request(
            {
                "market": request.market["market"],
                "languageCode": request.market["languageCode"],
                "brandDomain": request.domain,
                "brandNames": [request.name],
                "modelIds": request.model_ids,
            }
        )
    brand, created = _brand_upsert(org=org, request=request, user_id=caller.user_id)
    if not semrush_work or generation is None:
        return BrandCreated(brand=brand)
    try:
        brand_ensure_workspace(brand=brand, semrush_bearer=generation.credential.semrush_bearer)
        outcome = None
        if market_request_ is not None:
            (outcome,) = markets_provision(
                caller=caller, brand=brand, requests=[market_request_], sites=[brand.base_site], generation=generation
            )
            if outcome.market is None:
                raise FirstMarketFailed(outcome)
    except (SemrushUnavailable, SemrushRefused, FirstMarketFailed):
        if created:
            with transaction.atomic():
                Brand.objects.filter(id=brand.id).delete()
                if not request.base_site_id and brand.base_site_id:  # the base site was made with the brand
                    Site.objects.filter(id=brand.base_site_id).delete()
        raise
    return BrandCreated(brand=brand, market=outcome)


class FirstMarketFailed(Exception):
    """The first market of a new brand could not be made; `outcome.problem` says why (the answer)."""

    def __init__(self, outcome: MarketOutcome):
        super().__init__((outcome.problem or {}).get("code", ""))
        self.outcome = outcome


def _brand_upsert(*, org: Organization, request: BrandRequest, user_id: str) -> tuple[Brand, bool]:
    """The brand row (created or updated by name) and its base site, in one transaction. Returns
    (brand, created)."""
    fields: dict[str, Any] = {
        "urls": request.urls,
        "profile": request.profile,
        "updated_by": user_id,
        "status": request.status,
    }
    if request.primary_url:
        fields.update(primary_url=request.primary_url, domain=request.domain)
    if request.aliases:
        # The names, matched in prompts; the entries with their regions, returned as the brand's `brandAliases`.
        fields.update(aliases=[alias["name"] for alias in request.aliases])
        fields["profile"] = {**request.profile, "brandAliases": request.aliases}
    if request.model_ids:
        fields["semrush_model_ids"] = request.model_ids
    base_site = None
    if request.base_site_id:
        base_site = Site.objects.filter(id=request.base_site_id, organization=org).first()
        if base_site is None:
            raise SiteNotFound("baseSiteId names no site of the organization.")
    try:
        with transaction.atomic():
            brand = Brand.objects.select_for_update().filter(organization=org, name=request.name).first()
            created = brand is None
            if brand is None:
                brand = Brand.objects.create(organization=org, name=request.name, display_name=request.name, **fields)
            else:
                if brand.status == Brand.Status.ACTIVE and request.status == Brand.Status.PENDING:
                    raise BrandDemotionRefused(
                        f'Brand "{request.name}" already exists and is active; it cannot be made pending again.'
                    )
                if not request.aliases and "brandAliases" in (brand.profile or {}):
                    fields["profile"] = {**fields["profile"], "brandAliases": brand.profile["brandAliases"]}
                for name, value in fields.items():
                    setattr(brand, name, value)
                brand.save()
            if base_site is not None:
                Site.objects.filter(id=base_site.id, brand__isnull=True).update(brand=brand)
                brand.base_site = base_site
            elif brand.base_site is None and brand.primary_url:
                brand.base_site = Site.objects.create(organization=org, brand=brand, base_url=brand.primary_url)
            brand.save(update_fields=["base_site", "updated_at"])
    except IntegrityError:
        raise BrandExists() from None
    return brand, created


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


def brand_activate_pending(*, brand: Brand, semrush_bearer: str) -> Brand:
    """The wizard's approve: a pending brand gets its sub-workspace and becomes active. Requires a base site
    (InvalidRequest otherwise, as the original: nothing to track). Raises SemrushUnavailable or SemrushRefused."""
    if brand.base_site_id is None:
        raise InvalidRequest(
            [{"pointer": "", "code": "invalid", "message": f"Brand has no onboarded primary site: {brand.id}"}]
        )
    brand_ensure_workspace(brand=brand, semrush_bearer=semrush_bearer)
    Brand.objects.filter(id=brand.id).update(status=Brand.Status.ACTIVE)
    brand.status = Brand.Status.ACTIVE
    return brand


# --- Markets ---------------------------------------------------------------------------------------------


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

    Everything runs under the request's deadline: every Semrush call is bounded by it, and a market not
    started while MARKET_MIN_SECONDS remain is answered 503 `not_attempted` (retryable) and not created at
    all. One SyncBudget spans the whole batch (the old path's shared ~12 s write deadline). Markets are
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
        return _outcome_failed(
            outcome,
            NotAttempted(
                f"{slice_} was not attempted within the request's time budget; nothing was created. Send it again."
            ),
            retryable=True,
        )
    geo_target_id = geo.geo_target_id(country)
    try:
        if geo.language_in(semrush.languages(), language_code) is None:
            return _outcome_failed(outcome, UnknownLanguage(f"Language '{language_code}' not found"))
    except ClientError as exc:
        log.warning("semrush language catalogue unreadable", extra={"reason": type(exc).__name__})
        return _outcome_failed(outcome, semrush_failed(exc, f"{slice_} could not be set up in Semrush; retry later."))
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
        return _outcome_failed(outcome, semrush_failed(exc, f"{slice_} could not be set up in Semrush; retry later."))
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
            # error, a bug), the answer is the market without a handle, never a 500 that hides it.
            log.exception(
                "prompt generation not enqueued", extra={"market_id": str(market.id), "reason": "producer_error"}
            )
    return outcome


def _site_host(site: Site | None) -> str | None:
    return host_of(site.base_url) if site is not None else None


def _outcome_failed(outcome: MarketOutcome, exc: DomainError, **extra) -> MarketOutcome:
    outcome.status = exc.status
    outcome.problem = problem(exc.status, exc.code, exc.title, exc.detail, errors=exc.errors, **extra)
    return outcome


def _market_exists(outcome: MarketOutcome, brand: Brand, country: str, language_code: str) -> MarketOutcome:
    return _outcome_failed(
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


def market_create(*, caller: Caller, brand: Brand, request: MarketRequest, generation: Generation) -> MarketOutcome:
    """Add one market to a brand (createMarket): on `siteId`'s site or the brand's base site, in the brand's
    sub-workspace (provisioned here if the brand has none yet, as the original does)."""
    site = market_site(brand=brand, request=request)
    brand_ensure_workspace(brand=brand, semrush_bearer=generation.credential.semrush_bearer)
    (outcome,) = markets_provision(caller=caller, brand=brand, requests=[request], sites=[site], generation=generation)
    return outcome


# --- Activation ------------------------------------------------------------------------------------------


@dataclass
class Activation:
    status: int
    brand: Brand
    markets: list[MarketOutcome] = field(default_factory=list)

    @property
    def all_live(self) -> bool:
        return all(m.status in (201, 409) for m in self.markets)


def _brand_ensure_base_site(brand: Brand, *, domain: str | None) -> None:
    """A brand activated on a domain without a base site gets one for that domain (the site its markets
    track, returned as `baseSiteId`)."""
    if brand.base_site_id is not None or domain is None:
        return
    with transaction.atomic():
        site = Site.objects.create(organization_id=brand.organization_id, brand=brand, base_url=f"https://{domain}")
        if Brand.objects.filter(id=brand.id, base_site__isnull=True).update(base_site=site):
            brand.base_site = site
        else:
            transaction.set_rollback(True)
            brand.refresh_from_db(fields=["base_site"])


def markets_requested(*, brand: Brand, request: ActivateRequest) -> int:
    """How many markets an activation will try to create (what the organization's budget is charged): none for a
    pending brand or without `brandDomain`, else every listed market, or the one US/en market."""
    if brand.status == Brand.Status.PENDING or not request.domain_given:
        return 0
    return len(request.markets) if request.markets else 1


# The market an activation with a brand domain but no markets provisions, as in the original.
DEFAULT_ACTIVATION_MARKET = {"market": "US", "languageCode": "en"}


def brand_activate(*, caller: Caller, brand: Brand, request: ActivateRequest, generation: Generation) -> Activation:
    """Activate a brand (SPEC §3.3).

    - Pending: the body is ignored; the brand gets its sub-workspace and becomes active (200, no markets).
    - Active, without `brandDomain`: nothing to provision (400 when generation was asked for; else 200 after
      making sure of the sub-workspace).
    - Active, with `brandDomain`: each listed market (or US/en when none is listed) is created or found live;
      200 when every market is 201 or 409, else 207. A market that breaks a rule is answered in its entry.
    """
    semrush_bearer = generation.credential.semrush_bearer
    if brand.status == Brand.Status.PENDING:
        brand_activate_pending(brand=brand, semrush_bearer=semrush_bearer)
        return Activation(status=200, brand=brand)
    if not request.domain_given:
        if request.generate_prompts:
            raise InvalidRequest(
                [
                    {
                        "pointer": "/brandDomain",
                        "code": "invalid",
                        "message": "A primary URL is required to generate prompts",
                    }
                ]
            )
        brand_ensure_workspace(brand=brand, semrush_bearer=semrush_bearer)
        return Activation(status=200, brand=brand)
    entries = request.markets or [DEFAULT_ACTIVATION_MARKET]
    parsed: list[MarketRequest | MarketOutcome] = []
    for entry in entries:
        body = activation_market_body(entry, request.shared)
        try:
            parsed.append(market_request(body))
        except DomainError as exc:
            parsed.append(
                _outcome_failed(
                    MarketOutcome(
                        market_as_sent=body.get("market"), language_as_sent=body.get("languageCode"), status=0
                    ),
                    exc,
                )
            )
    brand_ensure_workspace(brand=brand, semrush_bearer=semrush_bearer)
    _brand_ensure_base_site(brand, domain=next((p.domain for p in parsed if isinstance(p, MarketRequest)), None))
    valid = [p for p in parsed if isinstance(p, MarketRequest)]
    provisioned = iter(
        markets_provision(
            caller=caller, brand=brand, requests=valid, sites=[brand.base_site] * len(valid), generation=generation
        )
        if valid
        else []
    )
    outcomes = [p if isinstance(p, MarketOutcome) else next(provisioned) for p in parsed]
    activation = Activation(status=200, brand=brand, markets=outcomes)
    if not activation.all_live:
        activation.status = 207
    return activation
