"""The market-generation job handler: DRS prompts -> Semrush project -> publish (SPEC §5.4-5.7).

Registered with the job runner at start-up (markets.apps). Each phase ends in a checkpoint fenced on the
lease, so a redelivery resumes where the last holder stopped:

1. generate: unless a batch is persisted, call DRS (lease confirmed by a heartbeat) and persist the
   batch before anything else. Once a batch is persisted DRS is not called again for the job; a call that
   failed, timed out or was throttled before that is made again by a later delivery.
2. write: exchange the promise token (only now, and at most once per delivery; IMS rotates it: the new one
   is stored, fenced, before the access token is used), take the project the market's row names, ensure the
   tags, read what the project already holds and write only the missing prompts (a crash between the write
   and its checkpoint cannot duplicate a prompt), then checkpoint `written`.
3. publish: publish the project (retryable: the writes are checkpointed) and return the result. A job
   whose prompts are written and published completes without calling IMS or Semrush.

Every Semrush write request (a tag, a batch of prompts, the publish) passes the fence right before it goes out
(markets/generation/fence.py): the delivery still holds the job, and the market still exists with no delete
holding it. A market deleted meanwhile cancels the job (LeaseLost here) or ends it MARKET_DELETED.
"""

import logging
import math
import time
from contextlib import nullcontext

from django.conf import settings

from jobs import handlers
from jobs.context import JobContext
from jobs.exceptions import JobFailed, LeaseLost, RetryLater, Throttled
from jobs.handlers import Progress
from jobs.models import AsyncJob
from markets.clients import drs, semrush_budget
from markets.clients import semrush as semrush_client
from markets.clients.semrush import SemrushClient
from markets.generation import fence, jobtype
from markets.models import Market
from serenity import metrics, tracing
from serenity.clients import http
from serenity.clients.http import ClientError, PermanentError, ReauthRequired, TransientError
from serenity.compiled import CompiledRead, as_uuid
from serenity.db import release_connection
from tokens import services as grants
from tokens.exceptions import NeedsReauth
from tokens.types import InvalidPromiseToken

log = logging.getLogger(__name__)

# The market's Semrush project, read before the prompts are written and again before publishing: compiled once
# (serenity/compiled.py).
_PROJECT = CompiledRead(lambda market_id: Market.objects.filter(id=market_id).values_list("semrush_project_id")[:1])

SOURCE_TAG = ("source", "semrush")
# A wait for the phase's first Semrush slot longer than this is made under a lease heartbeat.
WAIT_WITHOUT_HEARTBEAT_SECONDS = 5.0
# A wait for the first reserved slot ends this long before it: the IMS exchange and the phase's first checkpoint
# are made meanwhile, so the first call is not sent late (late calls bunch, and Semrush counts any second's).
SEMRUSH_LEAD_SECONDS = 1.0
ORIGIN_TAG = ("origin", "ai")


def phase_minimum() -> float:
    """The least budget worth starting a Semrush phase with; less, and the job is handed back to start
    afresh (its checkpoints keep what is done)."""
    return min(5.0, settings.JOB_TASK_TIME_LIMIT_SECONDS / 4)


# Checkpoint naming (by fingerprint) the stored token whose exchange failed in a way that may have reached
# IMS (its answer lost): if IMS then refuses that same token, the rotation was lost, and the job ends
# NEEDS_REAUTH saying so. A re-authorisation stores another token, so the mark no longer applies.
EXCHANGE_IN_DOUBT = "exchangeInDoubt"


def usable_prompts(batch: dict) -> list[str]:
    """The batch's prompt texts trimmed, with empties and exact duplicates dropped, in order."""
    seen, out = set(), []
    for item in batch.get("prompts") or []:
        text = item.get("prompt") if isinstance(item, dict) else None
        if isinstance(text, str) and text.strip() and text.strip() not in seen:
            seen.add(text.strip())
            out.append(text.strip())
    return out


class SemrushSession:
    """The Semrush client of one delivery, made on first use: the promise token is exchanged only when a
    Semrush call is about to happen, and at most once per delivery."""

    def __init__(self, handler: "MarketGenerationHandler", ctx: JobContext):
        self._handler, self._ctx = handler, ctx
        self._client: SemrushClient | None = None

    def client(self, *, calls: int) -> SemrushClient:
        """The delivery's client; made on the first use, with `calls` slots of the fleet's Semrush budget
        reserved for what this delivery still has to send."""
        if self._client is None:
            self._client = self._handler.semrush_for(self._ctx, calls=calls)
        return self._client


def semrush_calls(prompts: list[str], *, written: bool) -> int:
    """The Semrush requests a delivery makes from here when nothing goes wrong: the tags read, the project's
    prompts read (one page of PAGE_SIZE), the prompts written (a request per PROMPT_BATCH_SIZE) and the publish;
    the publish alone once the prompts are written. A workspace's first job creates its tags, a project holding
    more prompts has more pages, and a failed request is sent again: each such call takes a slot of its own."""
    if written:
        return 1
    return 3 + max(1, math.ceil(len(prompts) / semrush_client.PROMPT_BATCH_SIZE))


class MarketGenerationHandler:
    """The job handler of `generateSemrushMarket` (jobs/handlers.py protocol)."""

    def progress(self, job: AsyncJob) -> Progress:
        if job.checkpoints.get("written") is not None:
            return Progress.EFFECTS_WRITTEN
        if job.checkpoints.get("batch") is not None:
            return Progress.INPUT_PERSISTED
        return Progress.NOT_STARTED

    def describe(self, job: AsyncJob) -> str:
        """`FR/fr of Acme`, from the job's parameters (token-free: they never hold one)."""
        params = job.params or {}
        market = "/".join(str(p) for p in (params.get("market"), params.get("languageCode")) if p)
        brand = params.get("brand")
        return " of ".join(str(p) for p in (market, brand) if p)

    def run(self, ctx: JobContext) -> dict:
        batch = ctx.job.checkpoints.get("batch")
        if batch is None:
            batch = self.generate(ctx)
        prompts = usable_prompts(batch)
        if not prompts:
            raise JobFailed(jobtype.PROMPT_GENERATION_EMPTY, "DRS shipped no usable prompt.")
        # A redelivery after a crash between publish and COMPLETED has nothing left to do in Semrush: it
        # completes without IMS. With `written` only, the exchange happens for the publish alone.
        semrush = SemrushSession(self, ctx)
        if ctx.job.checkpoints.get("written") is None:
            ctx.require_time(phase_minimum(), before="writing")
            project_id = self.project_of(ctx)  # the market still there, before the token is exchanged
            client = semrush.client(calls=semrush_calls(prompts, written=False))
            with tracing.span("semrush.write", prompts=len(prompts)):
                self.write(ctx, client, prompts, project_id)
        project_id = ctx.job.checkpoints["projectId"]
        if not ctx.job.checkpoints.get("published"):
            ctx.require_time(phase_minimum(), before="publishing")
            self.project_of(ctx)  # the market still there, before the token is exchanged
            client = semrush.client(calls=semrush_calls(prompts, written=True))
            with tracing.span("semrush.publish"):
                self.publish(ctx, client, project_id)
        return {
            "promptCount": ctx.job.checkpoints["written"],
            "projectId": project_id,
            "published": True,
            "verdict": "ship",
        }

    # -- phase 1 --------------------------------------------------------------------------------------
    def generate(self, ctx: JobContext) -> dict:
        # A drained call: a stopping worker lets it finish (WORKER_STOP_DRAIN_SECONDS) with its batch persisted, then
        # hands the job back for the writes, so a deploy does not pay for the LLM generation twice.
        with ctx.drained_call("the DRS call"):
            ctx.checkpoint(phase=jobtype.PHASE_GENERATING)
            release_connection()  # no connection held idle while DRS works
            try:
                with ctx.heartbeat(), tracing.span("drs.generate"):
                    ship = drs.generate(ctx.job.params, timeout=ctx.remaining())
            except drs.DrsThrottled as exc:
                raise Throttled(exc.code, exc.reason, retry_after=exc.retry_after) from None
            except drs.DrsError as exc:
                log.info("DRS did not ship", extra={"code": exc.code, "reason": exc.reason})
                if exc.retryable:
                    raise RetryLater(exc.code, exc.reason) from None
                raise JobFailed(exc.code, exc.reason) from None
            batch = {"prompts": ship.prompts, "summary": ship.summary}
            # Written on a connection taken now (the call ran with none held), so a connection the database dropped
            # during the call is not the one written on. If this write still fails (the database still away), the
            # batch is lost and a later delivery calls DRS again.
            ctx.checkpoint(phase=jobtype.PHASE_GENERATED, batch=batch, batchSize=len(ship.prompts))
        return batch

    # -- phase 2 --------------------------------------------------------------------------------------
    def semrush_for(self, ctx: JobContext, *, calls: int) -> SemrushClient:
        """A Semrush client on a fresh write-scoped access token, with `calls` slots of the fleet's Semrush budget
        reserved for it. Never inside a transaction.

        1. Confirm the lease: a worker that lost the job must not exchange (IMS would rotate away the
           token the job's new owner holds).
        2. Load the grant; none, or one no key opens -> NEEDS_REAUTH. Reserve the phase's `calls` slots of the
           grant's pair and wait for the first (`wait_for_semrush`), before the exchange, so the token is fresh
           when the calls go.
        3. Exchange at IMS, once. Refused -> NEEDS_REAUTH (naming a lost rotation when an earlier
           exchange's answer was lost). An answer that may have been lost after IMS rotated the token ->
           checkpoint `exchangeInDoubt` and retry later, never in place. Not reached -> retry later. Throttled
           (429: IMS did not exchange) -> sent again after its Retry-After, no attempt spent.
        4. The token must be the requester's: otherwise its rotated successor is invalidated and the job
           ends NEEDS_REAUTH without any Semrush call.
        5. Store the rotated token, fenced on the lease and on the grant (JobContext.store_rotated_token): a
           failed fence invalidates it and raises LeaseLost.
        """
        ctx.confirm()
        loaded = grants.grant_load(ctx.job.id)
        if loaded is None:
            raise self.needs_reauth("The job has no usable stored credential.")
        in_doubt = ctx.job.checkpoints.get(EXCHANGE_IN_DOUBT) == loaded.fingerprint
        reservation = self.wait_for_semrush(ctx, loaded.pair.name, calls)
        try:
            with tracing.span("ims.exchange"):
                exchanged = grants.promise_exchange(pair=loaded.pair, token=loaded.token)
        except (NeedsReauth, InvalidPromiseToken):
            if in_doubt:
                raise self.needs_reauth(
                    "IMS refused the promise token: lost rotation (an earlier exchange's "
                    "answer was lost after IMS had rotated the token)."
                ) from None
            raise self.needs_reauth("IMS refused the promise token.") from None
        except http.Throttled as exc:  # IMS refused before exchanging: back-pressure, the token is as it was
            raise Throttled(jobtype.IMS_THROTTLED, f"IMS throttled: {exc}", retry_after=exc.retry_after) from None
        except TransientError as exc:
            if exc.maybe_processed:
                ctx.checkpoint(**{EXCHANGE_IN_DOUBT: loaded.fingerprint})
            raise RetryLater(jobtype.IMS_UNAVAILABLE, f"exchange failed: {exc}") from None
        except ClientError as exc:
            raise JobFailed(jobtype.IMS_EXCHANGE_REJECTED, f"exchange refused: {exc}") from None
        if exchanged.user_id != ctx.job.user_id:
            grants.promise_invalidate_quietly(pair=loaded.pair, token=exchanged.rotated, job_id=ctx.job.id)
            raise self.needs_reauth("The promise token belongs to another user than the job's requester.")
        ctx.store_rotated_token(exchanged=loaded, rotated=exchanged.rotated, **{EXCHANGE_IN_DOUBT: None})
        return SemrushClient(
            exchanged.access.access_token,
            deadline=time.monotonic() + min(settings.SEMRUSH_WRITE_BUDGET_SECONDS, ctx.remaining()),
            pair=loaded.pair.name,
            # Every write request passes the fence right before it goes out: the lease is still this delivery's,
            # and the market still exists with no delete holding it (markets/generation/fence.py).
            write_guard=lambda timeout: fence.semrush_write(ctx, timeout=timeout),
            reservation=reservation,
        )

    @staticmethod
    def wait_for_semrush(ctx: JobContext, pair: str, calls: int) -> semrush_budget.Reservation:
        """Reserve the phase's `calls` consecutive slots of the fleet's Semrush budget (one statement) and wait
        for the first, in place: the delivery keeps its lease (a heartbeat confirms it while the wait is long)
        and holds no database connection, so when its turn comes it makes its calls one slot after another and
        nothing is repeated. The wait may last as long as the delivery can afford and still have its whole
        Semrush write budget after it; a first slot further than that is not taken: Throttled, the job sent again
        when a slot would be free (no attempt spent). A stopping worker that hands the job back ends the wait
        (LeaseLost: nothing more is sent). The wait ends SEMRUSH_LEAD_SECONDS before the first slot: the token's
        exchange and the phase's first checkpoint happen then, and the first call still sleeps until its slot, so
        the phase's calls are not sent late behind a queue (late calls bunch, and Semrush counts any second's
        calls). A slot sooner than that is not waited for here: the line is short, so nothing bunches. The lead is
        always affordable: a first slot is never nearer than it, so a delivery with less time than its write budget
        (a redelivery's short task budget) still takes an idle budget's first slot instead of deferring for ever."""
        wait = max(0.0, ctx.remaining() - settings.SEMRUSH_WRITE_BUDGET_SECONDS) + SEMRUSH_LEAD_SECONDS
        try:
            reservation = semrush_budget.reserve(pair, calls, wait=wait, what="semrush.reserve")
        except semrush_budget.OverBudget as exc:
            metrics.emit(SemrushBudgetDeferred=(1, metrics.COUNT))
            raise Throttled(jobtype.SEMRUSH_THROTTLED, f"Semrush budget: {exc}", retry_after=exc.retry_after) from None
        if reservation.starts_in() > SEMRUSH_LEAD_SECONDS:
            waiting = tracing.span("semrush.wait", seconds=round(reservation.starts_in(), 1))
            with (
                ctx.heartbeat() if reservation.starts_in() > WAIT_WITHOUT_HEARTBEAT_SECONDS else nullcontext(),
                waiting,
            ):
                while (left := reservation.starts_in() - SEMRUSH_LEAD_SECONDS) > 0:
                    if ctx.handed_back:
                        raise LeaseLost("waiting for its Semrush slots")
                    time.sleep(min(1.0, left))
        if ctx.handed_back:
            raise LeaseLost("waiting for its Semrush slots")
        return reservation

    @staticmethod
    def project_of(ctx: JobContext) -> str:
        """The Semrush project of the job's market: the one the market's row names, read now. Never a project
        found by its slice, which after a delete and a re-create of the market would be the new market's.
        JobFailed MARKET_DELETED when the market is gone; RetryLater while it has no project yet."""
        market_id = ctx.job.params.get("marketId")
        row = _PROJECT.first(market_id=as_uuid(market_id)) if market_id else None
        if row is None:
            raise JobFailed(jobtype.MARKET_DELETED, "The market was deleted before its prompts were written.")
        (project_id,) = row
        if not project_id:
            raise RetryLater(jobtype.SEMRUSH_PROJECT_MISSING, "The market's Semrush project does not exist yet.")
        return str(project_id)

    def write(self, ctx: JobContext, semrush: SemrushClient, prompts: list[str], project_id: str) -> None:
        params = ctx.job.params
        ctx.checkpoint(phase=jobtype.PHASE_WRITING, projectId=project_id)
        try:
            tags = semrush.ensure_tags(
                workspace_id=params["workspaceId"], wanted={"source": ["semrush"], "origin": ["ai"]}
            )
            present = {p.get("text") for p in semrush.list_prompts(project_id=project_id)}
            missing = [p for p in prompts if p not in present]
            if missing:
                semrush.write_prompts(
                    project_id=project_id,
                    user_id=ctx.job.user_id or "",
                    prompts=[{"text": text, "tagIds": [tags[SOURCE_TAG], tags[ORIGIN_TAG]]} for text in missing],
                )
        except http.Throttled as exc:
            raise Throttled(
                jobtype.SEMRUSH_THROTTLED, f"Semrush throttled: {exc}", retry_after=exc.retry_after
            ) from None
        except TransientError as exc:
            raise RetryLater(jobtype.SEMRUSH_UNAVAILABLE, f"Semrush failed: {exc}") from None
        except ReauthRequired:
            raise self.needs_reauth("Semrush refused the access token.") from None
        except PermanentError as exc:
            raise JobFailed(jobtype.SEMRUSH_REJECTED, f"Semrush refused the write: HTTP {exc.status}") from None
        ctx.checkpoint(phase=jobtype.PHASE_WRITTEN, written=len(prompts), writtenNew=len(missing))

    # -- phase 3 --------------------------------------------------------------------------------------
    def publish(self, ctx: JobContext, semrush: SemrushClient, project_id: str) -> None:
        try:  # the publish request passes the fence (`semrush_for`): never for a job another delivery owns
            semrush.publish(project_id=project_id)
        except http.Throttled as exc:
            raise Throttled(
                jobtype.SEMRUSH_THROTTLED, f"Semrush throttled: {exc}", retry_after=exc.retry_after
            ) from None
        except (TransientError, PermanentError) as exc:
            raise RetryLater(jobtype.SEMRUSH_PUBLISH_FAILED, f"publish failed: {exc}") from None
        except ReauthRequired:
            raise self.needs_reauth("Semrush refused the access token at publish.") from None
        ctx.checkpoint(phase=jobtype.PHASE_PUBLISHED, published=True)

    @staticmethod
    def needs_reauth(message: str) -> JobFailed:
        return JobFailed(jobtype.NEEDS_REAUTH, message, needs_reauth=True)


handlers.register(jobtype.MARKET_GENERATION_JOB_TYPE, MarketGenerationHandler())
