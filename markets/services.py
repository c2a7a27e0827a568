"""Regeneration (SPEC §12): the one shared producer, run again for an existing market."""
import logging

from markets.exceptions import (
    BrandNotActive,
    GenerationDisabled,
    GenerationUnavailable,
    MarketNotFound,
    NoCatalogueSeeds,
    SemrushUnavailable,
)
from markets.models import Brand, Market
from markets.onboarding.services import request_deadline
from markets.producer import (
    Generation,
    NotEnqueued,
    ProducerRefused,
    async_generation_enabled,
    market_generation_produce,
)
from serenity.auth import Caller
from tokens.exceptions import CredentialUnavailable, InvalidForwardedToken

log = logging.getLogger(__name__)

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
    the entry points (Serenity active: the caller's selector; the flag; readiness). Returns the handle
    `{jobId, status, reused}`; raises MarketNotFound (also for another brand's market), the gates'
    errors, and what the producer's refusal maps to.
    """
    if not async_generation_enabled():
        raise GenerationDisabled("Prompt generation runs only with SERENITY_ASYNC_PROMPT_GEN on.")
    market = Market.objects.select_related("site").filter(id=market_id, brand=brand).first()
    if market is None:
        raise MarketNotFound()
    if not brand.semrush_workspace_id:
        raise BrandNotActive()
    market.brand = brand
    try:
        return market_generation_produce(caller=caller, brand=brand, market=market, generation=generation,
                                         deadline=request_deadline())
    except ProducerRefused as refused:
        log.warning("prompt generation not regenerated", extra={"market_id": str(market.id),
                                                                "reason": refused.reason.value})
        raise _REFUSALS[refused.reason]() from None
