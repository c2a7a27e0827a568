"""Activation (activateMarkets, SPEC §3.3): a pending brand approved, or an active brand's markets created or
found live on its domain, each answered in its own entry (200 when all are live, else 207).
"""

from dataclasses import dataclass, field

from django.db import transaction

from markets.credentials import Generation
from markets.exceptions import InvalidRequest
from markets.models import Brand, Site
from markets.onboarding.inputs import ActivateRequest, MarketRequest, activation_market_body, market_request
from markets.onboarding.provisioning import MarketOutcome, brand_ensure_workspace, markets_provision, outcome_failed
from serenity.auth import Caller
from serenity.problems import DomainError


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
                outcome_failed(
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
