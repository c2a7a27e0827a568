"""Onboarding services: brands, markets, activation; the old synchronous prompt path (SPEC §3, §8).

Network calls (Semrush, the producer) happen after the rows they belong to are committed; a market whose
Semrush project cannot be made is removed again, so a retry of the same slice is not answered 409.
"""
import contextvars
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from jobs.models import AsyncJob
from markets import geo
from markets.clients.semrush import SemrushClient
from markets.jobid import generation_job_id
from markets.models import Brand, Market, Organization, Site
from markets.producer import (
    Generation,
    NotEnqueued,
    ProducerRefused,
    market_generation_enqueue,
    market_generation_produce,
)
from markets.sync_prompts import SyncBudget, sync_prompts_write
from serenity.auth import Caller
from serenity.clients.http import ClientError
from serenity.problems import Conflict, DomainError, NotFound, problem
from tokens.exceptions import CredentialUnavailable, InvalidForwardedToken

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
    all. One SyncBudget spans the whole batch (the old path's shared ~12 s write deadline). Markets are
    provisioned MARKET_PROVISION_CONCURRENCY at a time (each is independent: its own row, project and job);
    the answer lists them in the order asked.
    """
    if brand.status != Brand.Status.ACTIVE or not brand.semrush_workspace_id:
        raise BrandNotActive()
    deadline = deadline or request_deadline()
    semrush = SemrushClient(caller.bearer, deadline=deadline)
    budget = SyncBudget()

    def provision(one_slice) -> MarketOutcome:
        country, language_code, site = one_slice
        return _market_provision(caller=caller, brand=brand, country=country, language_code=language_code,
                                 site=site, generation=generation, semrush=semrush, budget=budget, deadline=deadline)

    return in_parallel(provision, slices, limit=settings.MARKET_PROVISION_CONCURRENCY)


def in_parallel(fn, items: list, *, limit: int) -> list:
    """`[fn(item) for item in items]`, in order, up to `limit` at a time on threads of their own.

    Each call runs in a copy of the caller's context (its request id stays on the log lines) and closes its
    database connection when done. Inside a transaction the calls run one by one on this thread instead: a
    thread of its own could not see the transaction's uncommitted rows. An exception propagates as it would
    from the loop, once the calls already started have ended.
    """
    if limit <= 1 or len(items) <= 1 or connection.in_atomic_block:
        return [fn(item) for item in items]

    def run(item, context):
        try:
            return context.run(fn, item)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=min(limit, len(items)), thread_name_prefix="provision") as pool:
        return list(pool.map(run, items, [contextvars.copy_context() for _ in items]))


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
        outcome.problem = problem(409, *MARKET_EXISTS, f"{country}/{language_code} is already live.",
                                  **existing_market_handle(brand, country, language_code))
        return outcome
    market.brand = brand
    try:
        where = {"workspace_id": brand.semrush_workspace_id, "geo_target_id": market.geo_target_id,
                 "language_code": language_code}
        # A new market has no project yet: create it at once (a project that exists answers 409 and is re-read).
        project = semrush.create_project(**where, name=f"{brand.display_name or brand.name} {country}/{language_code}")
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


def existing_market_handle(brand: Brand, country: str, language_code: str) -> dict:
    """For a 409: the live market's id and, when it has one, its generation job `{jobId, status}`, so the
    UI can poll it or offer a regeneration."""
    market = Market.objects.filter(brand=brand, country=country, language_code=language_code).first()
    if market is None:
        return {}
    handle = {"marketId": str(market.id)}
    job_id = generation_job_id(brand.id, market.geo_target_id, market.language_code)
    status = AsyncJob.objects.filter(id=job_id).values_list("status", flat=True).first()
    if status is not None:
        handle["promptGeneration"] = {"jobId": str(job_id), "status": status}
    return handle


# --- Regeneration (SPEC §12) ---------------------------------------------------------------------------------

class MarketNotFound(NotFound):
    code, title = "market_not_found", "Market not found"


class GenerationDisabled(Conflict):
    code, title = "prompt_generation_disabled", "Asynchronous prompt generation is not enabled"


class GenerationUnavailable(DomainError):
    status, code, title = 503, "prompt_generation_unavailable", "Prompt generation is not available right now"


class NoCatalogueSeeds(Conflict):
    code, title = "no_catalogue_seeds", "The Semrush catalogue holds no seeds for this market"


# Why the producer queued nothing -> what the regeneration endpoint answers.
_REFUSALS = {
    NotEnqueued.CONSUMER_NOT_READY: lambda: GenerationUnavailable(
        "No generation worker is ready in this environment; try again later.", headers={"Retry-After": "60"}),
    NotEnqueued.PROMISE_PAIR_REQUIRED: lambda: GenerationDisabled("The Semrush client pair is required."),
    NotEnqueued.CATALOGUE_UNREADABLE: lambda: SemrushUnavailable("The Semrush catalogue could not be read."),
    NotEnqueued.NO_SEEDS: lambda: NoCatalogueSeeds("Nothing to generate from; the catalogue may fill later."),
    NotEnqueued.TOKEN_ALREADY_GRANTED: lambda: InvalidForwardedToken("The token already belongs to a job."),
    NotEnqueued.INVALID_PROMISE_TOKEN: lambda: InvalidForwardedToken(),
    NotEnqueued.IMS_MINT_FAILED: lambda: CredentialUnavailable("No credential was issued; try again."),
    NotEnqueued.ENQUEUE_FAILED: lambda: GenerationUnavailable(
        "The job could not be queued; try again.", headers={"Retry-After": "30"}),
}


def market_regenerate(*, caller: Caller, brand: Brand, market_id, generation: Generation) -> dict:
    """Generate a market's prompts again (SPEC §12): the one shared producer, for an existing market.

    Same deterministic job id: a live job is reused (nothing minted); a finished one, whatever its
    outcome, is replaced under the same id, with seeds read afresh from the catalogue. New prompts are
    added to the project; those it already holds are not written twice, and none is removed. Gated like
    the entry points (Serenity active, brand active, the flag, readiness). Returns the handle
    `{jobId, status, reused}`; raises MarketNotFound (also for another brand's market), the gates'
    errors, and what the producer's refusal maps to.
    """
    require_serenity(brand.organization)
    if not async_generation_enabled():
        raise GenerationDisabled("Prompt generation runs only with SERENITY_ASYNC_PROMPT_GEN on.")
    market = Market.objects.select_related("site").filter(id=market_id, brand=brand).first()
    if market is None:
        raise MarketNotFound()
    if brand.status != Brand.Status.ACTIVE or not brand.semrush_workspace_id:
        raise BrandNotActive()
    market.brand = brand
    try:
        return market_generation_produce(caller=caller, brand=brand, market=market, generation=generation,
                                         deadline=request_deadline())
    except ProducerRefused as refused:
        log.warning("prompt generation not regenerated", extra={"market_id": str(market.id),
                                                                "reason": refused.reason.value})
        raise _REFUSALS[refused.reason]() from None
