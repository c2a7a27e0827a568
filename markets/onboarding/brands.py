"""Brands (createBrand, SPEC §3): the upsert of the brand row and its base site, and, for an active brand of a
Serenity organization, its Semrush sub-workspace and first market (markets/onboarding/provisioning.py). A brand
whose Semrush set-up failed on its creation is not left behind.
"""

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from markets.credentials import Generation
from markets.exceptions import (
    BrandDemotionRefused,
    BrandExists,
    SemrushRefused,
    SemrushUnavailable,
    SerenityInactiveForOrg,
    SiteNotFound,
)
from markets.models import Brand, Organization, Site
from markets.onboarding.inputs import BrandRequest, market_request, semrush_work_errors
from markets.onboarding.provisioning import MarketOutcome, brand_ensure_workspace, markets_provision
from serenity.auth import Caller


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
