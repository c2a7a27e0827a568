"""Generation services behind the API: re-authorising a job that awaits a fresh credential (SPEC §7) and
regenerating an existing market's prompts with the one shared producer (SPEC §12)."""

import logging

from jobs import services as job_services
from jobs.models import AsyncJob
from markets.credentials import Generation, async_generation_enabled
from markets.deadlines import request_deadline
from markets.exceptions import (
    BrandNotActive,
    GenerationDisabled,
    GenerationUnavailable,
    JobNotFound,
    MarketNotFound,
    NoCatalogueSeeds,
    SemrushUnavailable,
)
from markets.generation.fence import market_open_q
from markets.generation.producer import NotEnqueued, ProducerRefused, market_generation_produce
from markets.models import Brand, Market, Organization
from serenity import limits
from serenity.auth import Caller
from serenity.clients.http import ClientError
from tokens.delegation import forwarded_promise, request_credential
from tokens.exceptions import CredentialUnavailable, InvalidForwardedToken
from tokens.pairs import ClientPair
from tokens.services import promise_mint
from tokens.types import InvalidPromiseToken

log = logging.getLogger(__name__)

# Why the producer queued nothing -> what the regeneration endpoint answers.
_REFUSALS = {
    NotEnqueued.CONSUMER_NOT_READY: lambda: GenerationUnavailable(
        "No generation worker is ready in this environment; try again later.", headers={"Retry-After": "60"}
    ),
    NotEnqueued.PROMISE_PAIR_REQUIRED: lambda: GenerationDisabled("The Semrush client pair is required."),
    NotEnqueued.CATALOGUE_UNREADABLE: lambda: SemrushUnavailable("The Semrush catalogue could not be read."),
    NotEnqueued.NO_SEEDS: lambda: NoCatalogueSeeds("Nothing to generate from; the catalogue may fill later."),
    NotEnqueued.TOKEN_ALREADY_GRANTED: lambda: InvalidForwardedToken("The token already belongs to a job."),
    NotEnqueued.INVALID_PROMISE_TOKEN: lambda: InvalidForwardedToken(),
    NotEnqueued.IMS_MINT_FAILED: lambda: CredentialUnavailable("No credential was issued; try again."),
    NotEnqueued.ENQUEUE_FAILED: lambda: GenerationUnavailable(
        "The job could not be queued; try again.", headers={"Retry-After": "30"}
    ),
}


def market_regenerate(*, caller: Caller, brand: Brand, market_id, generation: Generation) -> dict:
    """Generate a market's prompts again (SPEC §12): the one shared producer, for an existing market.

    Same deterministic job id: a live job is reused (nothing minted); a finished one, whatever its
    outcome, is replaced under the same id, with seeds read afresh from the catalogue. New prompts are
    added to the project; those it already holds are not written twice, and none is removed. Gated like
    the entry points (Serenity active: the caller's selector; the flag; readiness). Returns the handle
    `{jobId, status, reused}`; raises MarketNotFound (also for another brand's market), the gates'
    errors, and what the producer's refusal maps to. A market being deleted answers as a missing one.
    """
    if not async_generation_enabled():
        raise GenerationDisabled("Prompt generation runs only with SERENITY_ASYNC_PROMPT_GEN on.")
    # A market a delete holds is as good as gone: its generation would be cancelled again at once.
    market = Market.objects.select_related("site").filter(market_open_q(), id=market_id, brand=brand).first()
    if market is None:
        raise MarketNotFound()
    if not brand.semrush_workspace_id:
        raise BrandNotActive()
    market.brand = brand
    try:
        return market_generation_produce(
            caller=caller, brand=brand, market=market, generation=generation, deadline=request_deadline()
        )
    except ProducerRefused as refused:
        log.warning(
            "prompt generation not regenerated", extra={"market_id": str(market.id), "reason": refused.reason.value}
        )
        raise _REFUSALS[refused.reason]() from None


def generation_job_reauthorize(*, caller: Caller, job: AsyncJob, header: str | None, pair: ClientPair) -> AsyncJob:
    """Give a job awaiting re-authorisation a fresh credential and queue the same job again (SPEC §7).

    `job` is one the caller may see (read through job_get_for_caller). Steps:
    1. A malformed typed `x-promise-token` is refused before anything else happens.
    2. Charged once the caller may see the job: a stranger never spends anyone's budget. The organization's
       budget is spent only by the job's requester, the one caller who may act on it: a caller who may read the
       job but not re-authorise it (a read-only admin, another user of the organization) spends only their own.
    3. The job's reopen lock: of concurrent calls one takes it, the others get 409 at once and obtain nothing.
    4. Only the winner, outside any transaction, obtains the credential: the promise token IMS rotated for the
       forwarded one (minted from a bearer that named the job's organization: 403 otherwise), or one minted from
       the caller's IMS bearer. If IMS does not issue it, the lock is given back and the job still awaits
       re-authorisation (502).
    """
    forwarded_promise(header)
    limits.charge_user(limits.REAUTH, caller)
    if job.user_id and job.user_id == caller.user_id:
        limits.charge_org(limits.ORG_REAUTH, job.organization_id)

    ims_org_id = Organization.objects.values_list("ims_org_id", flat=True).filter(id=job.organization_id).first()

    def obtain_token():
        credential = request_credential(caller=caller, header=header, pair=pair, ims_org_id=ims_org_id or "")
        return credential.take_promise() or promise_mint(bearer=credential.mint_bearer, pair=pair)

    try:
        return job_services.job_reauthorize(job_id=job.id, user_id=caller.user_id, pair=pair, obtain_token=obtain_token)
    except ClientError as exc:
        log.warning(
            "re-authorisation credential not issued",
            extra={"job_id": str(job.id), "reason": type(exc).__name__, "status": exc.status},
        )
        raise CredentialUnavailable("The job still awaits re-authorisation; try again.") from None
    except InvalidPromiseToken as exc:
        raise InvalidForwardedToken(str(exc)) from None
    except AsyncJob.DoesNotExist:
        # Purged between the scoped read and the row lock.
        raise JobNotFound() from None
