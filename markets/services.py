"""Onboarding services: brands, markets, activation; the old synchronous prompt path (SPEC §3, §8).

Network calls (Semrush, the producer) happen after the rows they belong to are committed; a market whose
Semrush project cannot be made is removed again, so a retry of the same slice is not answered 409.
"""
import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, transaction

from markets import geo
from markets.clients.semrush import SemrushClient
from markets.intent import IntentClassifier, KeywordIntentClassifier, brand_needles, prompt_type
from markets.models import Brand, Market, Organization, Site
from markets.producer import Generation, market_generation_enqueue
from markets.seeds import example_prompts
from serenity.auth import Caller
from serenity.clients.http import ClientError, TransientError
from serenity.problems import Conflict, DomainError, problem

log = logging.getLogger(__name__)


class SerenityInactive(DomainError):
    status, code, title = 403, "serenity_not_active", "Serenity is not active for this organization"


class BrandExists(Conflict):
    code, title = "brand_exists", "A brand with this domain already exists in the organization"


class BrandNotActive(Conflict):
    code, title = "brand_not_active", "The brand is not active yet; activate it first"


class SemrushUnavailable(DomainError):
    status, code, title = 502, "semrush_unavailable", "Semrush did not complete the request"


MARKET_EXISTS = ("market_exists", "This market is already live for the brand")
NOT_ATTEMPTED = ("not_attempted", "Not attempted within the request's time budget")


def async_generation_enabled() -> bool:
    return str(settings.SERENITY_ASYNC_PROMPT_GEN).strip().lower() == "true"


@dataclass
class MarketOutcome:
    country: str
    language_code: str
    status: int
    market: Market | None = None
    problem: dict | None = None
    prompt_generation: dict | None = None
    sync_prompts: dict | None = None


@dataclass
class SyncBudget:
    """The old path's single write deadline, shared by every market of one request."""

    deadline: float = field(default_factory=lambda: time.monotonic() + settings.SYNC_WRITE_DEADLINE_SECONDS)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


def require_serenity(org: Organization) -> None:
    if not org.is_serenity_active:
        raise SerenityInactive()


# --- Brands ----------------------------------------------------------------------------------------------

def brand_create(*, caller: Caller, org: Organization, name: str, domain: str, primary_url: str = "",
                 aliases: list[str] | None = None) -> Brand:
    """Create a pending brand and its base site in one transaction. Raises BrandExists."""
    require_serenity(org)
    try:
        with transaction.atomic():
            brand = Brand.objects.create(organization=org, name=name, display_name=name, domain=domain.lower(),
                                         primary_url=primary_url, aliases=aliases or [])
            site = Site.objects.create(organization=org, brand=brand, base_url=primary_url or f"https://{domain}")
            brand.base_site = site
            brand.save(update_fields=["base_site"])
    except IntegrityError:
        raise BrandExists() from None
    return brand


def brand_activate_workspace(*, caller: Caller, brand: Brand) -> Brand:
    """Provision the brand's Semrush sub-workspace (once) and mark the brand active."""
    if brand.semrush_workspace_id is None:
        try:
            workspace = SemrushClient(caller.bearer).create_workspace(
                name=brand.display_name or brand.name, parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID
            )
        except ClientError as exc:
            log.warning("semrush workspace not created",
                        extra={"brand_id": str(brand.id), "reason": type(exc).__name__})
            raise SemrushUnavailable("The brand's Semrush workspace could not be created.") from None
        Brand.objects.filter(id=brand.id, semrush_workspace_id__isnull=True).update(semrush_workspace_id=workspace)
        brand.refresh_from_db(fields=["semrush_workspace_id"])
    Brand.objects.filter(id=brand.id).update(status=Brand.Status.ACTIVE)
    brand.status = Brand.Status.ACTIVE
    return brand


# --- Markets ---------------------------------------------------------------------------------------------

def request_deadline() -> float:
    """The `time.monotonic()` by which an entry point must have answered (REQUEST_DEADLINE_SECONDS)."""
    return time.monotonic() + settings.REQUEST_DEADLINE_SECONDS


def markets_provision(*, caller: Caller, brand: Brand, slices: list[tuple[str, str, Site | None]],
                      generation: Generation, deadline: float | None = None) -> list[MarketOutcome]:
    """Create, set up in Semrush and publish each market slice, then give each new one its prompts.

    Everything runs under the request's deadline: every Semrush call is bounded by it, and a market not
    started while MARKET_MIN_SECONDS remain is answered 503 `not_attempted` (retryable) and not created at
    all. One SyncBudget spans the whole batch (the old path's shared ~12 s write deadline).
    """
    if brand.status != Brand.Status.ACTIVE or not brand.semrush_workspace_id:
        raise BrandNotActive()
    deadline = deadline or request_deadline()
    semrush = SemrushClient(caller.bearer, deadline=deadline)
    budget = SyncBudget()
    return [
        _market_provision(caller=caller, brand=brand, country=country, language_code=language_code, site=site,
                          generation=generation, semrush=semrush, budget=budget, deadline=deadline)
        for country, language_code, site in slices
    ]


# The least time worth starting a market with: a project lookup or creation, a publish and the producer.
MARKET_MIN_SECONDS = 3.0


def _market_provision(*, caller, brand, country, language_code, site, generation, semrush, budget,
                      deadline) -> MarketOutcome:
    country = country.upper()
    outcome = MarketOutcome(country=country, language_code=language_code, status=201)
    if deadline - time.monotonic() < MARKET_MIN_SECONDS:
        outcome.status = 503
        outcome.problem = problem(503, *NOT_ATTEMPTED, f"{country}/{language_code} was not attempted within the "
                                  "request's time budget; nothing was created. Send it again.", retryable=True)
        return outcome
    try:
        with transaction.atomic():
            market = Market.objects.create(brand=brand, site=site, country=country, language_code=language_code,
                                           geo_target_id=geo.geo_target_id(country))
    except IntegrityError:
        outcome.status = 409
        outcome.problem = problem(409, *MARKET_EXISTS, f"{country}/{language_code} is already live.")
        return outcome
    market.brand = brand
    try:
        where = {"workspace_id": brand.semrush_workspace_id, "geo_target_id": market.geo_target_id,
                 "language_code": language_code}
        project = semrush.find_project(**where) or semrush.create_project(
            **where, name=f"{brand.display_name or brand.name} {country}/{language_code}")
        market.semrush_project_id = project["id"]
        if not generation.use_async:
            outcome.sync_prompts = sync_prompts_write(caller=caller, brand=brand, market=market, semrush=semrush,
                                                      budget=budget)
        semrush.publish(project_id=project["id"])
    except ClientError as exc:
        log.warning("market not provisioned in Semrush; market removed",
                    extra={"brand_id": str(brand.id), "market": f"{country}/{language_code}",
                           "reason": type(exc).__name__, "detail": str(exc), "status": exc.status})
        Market.objects.filter(id=market.id).delete()
        outcome.status = 502
        outcome.problem = problem(502, SemrushUnavailable.code, SemrushUnavailable.title,
                                  f"{country}/{language_code} could not be set up in Semrush; retry later.")
        return outcome
    market.publish_state = Market.PublishState.PUBLISHED
    market.save(update_fields=["semrush_project_id", "publish_state", "updated_at"])
    outcome.market = market
    if generation.use_async:
        try:
            outcome.prompt_generation = market_generation_enqueue(caller=caller, brand=brand, market=market,
                                                                  generation=generation, deadline=deadline)
        except Exception:
            # The market is committed and published: whatever went wrong in the producer (a database
            # error, a bug), the answer is the market without a handle, never a 500 that hides it.
            log.exception("prompt generation not enqueued", extra={"market_id": str(market.id),
                                                                   "reason": "producer_error"})
    return outcome


# --- The old synchronous path (SPEC §8) -------------------------------------------------------------------

def sync_prompts_write(*, caller: Caller, brand: Brand, market: Market, semrush: SemrushClient, budget: SyncBudget,
                       classifier: IntentClassifier | None = None) -> dict:
    """Copy the catalogue's verbatim example prompts into the market's project, tagged, within the
    request's shared deadline. Returns `{status, written}`: `written` (all of them), `partial` (the deadline
    or Semrush cut it short), `skipped` (no time left before starting), `empty` (no catalogue prompts),
    `failed` (Semrush refused)."""
    if budget.remaining() <= 0:
        return {"status": "skipped", "written": 0}
    client = SemrushClient(caller.bearer, deadline=budget.deadline)
    classifier = classifier or KeywordIntentClassifier()
    try:
        items = client.brand_topics(workspace_id=brand.semrush_workspace_id, domain=brand.domain,
                                    country=market.country)
    except ClientError as exc:
        log.warning("catalogue unreadable; market left without prompts", extra={"reason": type(exc).__name__})
        return {"status": "failed", "written": 0}
    texts = example_prompts(items, settings.SYNC_TOP_TOPICS)
    if not texts:
        return {"status": "empty", "written": 0}
    needles = brand_needles(brand.name, brand.aliases)
    labelled = [(t, prompt_type(t, needles), classifier.classify(t)) for t in texts]
    written = 0
    try:
        tags = client.ensure_tags(workspace_id=brand.semrush_workspace_id, wanted={
            "source": ["semrush"],
            "type": sorted({kind for _, kind, _ in labelled}),
            "intent": sorted({intent for _, _, intent in labelled}),
        })
        batch = 100
        for start in range(0, len(labelled), batch):
            if budget.remaining() <= 0:
                break
            chunk = labelled[start:start + batch]
            client.write_prompts(project_id=market.semrush_project_id, user_id=caller.user_id, prompts=[
                {"text": t, "tagIds": [tags[("source", "semrush")], tags[("type", kind)], tags[("intent", intent)]]}
                for t, kind, intent in chunk
            ])
            written += len(chunk)
    except TransientError as exc:
        log.warning("old-path prompt write cut short", extra={"reason": type(exc).__name__, "written": written})
    except ClientError as exc:
        log.warning("old-path prompt write refused", extra={"reason": type(exc).__name__, "written": written})
        return {"status": "partial" if written else "failed", "written": written}
    return {"status": _sync_status(written, len(labelled)), "written": written}


def _sync_status(written: int, total: int) -> str:
    if written == total:
        return "written"
    return "partial" if written else "skipped"
