"""The market-generation job handler: DRS prompts -> Semrush project -> publish (SPEC §5.4-5.7).

Registered with the job runner at start-up (markets.apps). Each phase ends in a checkpoint fenced on the
lease, so a redelivery resumes where the last holder stopped:

1. generate: unless a batch is persisted, call DRS (lease confirmed by a heartbeat) and persist the
   batch before anything else. DRS is never called twice for a job.
2. write: exchange the promise token (only now, and at most once per delivery; IMS rotates it: the new one
   is stored, fenced, before the access token is used), resolve the market's project, ensure the tags,
   read what the project already holds and write only the missing prompts (a crash between the write
   and its checkpoint cannot duplicate a prompt), then checkpoint `written`.
3. publish: publish the project (retryable: the writes are checkpointed) and return the result. A job
   whose prompts are written and published completes without calling IMS or Semrush.
"""
import logging
import time

from django.conf import settings

from jobs import registry
from jobs.exceptions import RetryableJobError, TerminalJobError
from jobs.leases import JobRun
from markets import constants as c
from markets.clients import drs
from markets.clients.semrush import SemrushClient
from serenity.clients.http import ClientError, PermanentError, ReauthRequired, TransientError
from tokens import services as grants
from tokens.exceptions import NeedsReauth
from tokens.types import InvalidPromiseToken

log = logging.getLogger(__name__)

SOURCE_TAG = ("source", "semrush")
ORIGIN_TAG = ("origin", "ai")
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

    def __init__(self, handler: "MarketGenerationHandler", run: JobRun):
        self._handler, self._run = handler, run
        self._client: SemrushClient | None = None

    def client(self) -> SemrushClient:
        if self._client is None:
            self._client = self._handler.semrush_for(self._run)
        return self._client


class MarketGenerationHandler:
    def run(self, run: JobRun) -> dict:
        batch = run.job.checkpoints.get("batch")
        if batch is None:
            batch = self.generate(run)
        prompts = usable_prompts(batch)
        if not prompts:
            raise TerminalJobError(c.PROMPT_GENERATION_EMPTY, "DRS shipped no usable prompt.")
        # A redelivery after a crash between publish and COMPLETED has nothing left to do in Semrush: it
        # completes without IMS. With `written` only, the exchange happens for the publish alone.
        semrush = SemrushSession(self, run)
        if run.job.checkpoints.get("written") is None:
            self.write(run, semrush.client(), prompts)
        project_id = run.job.checkpoints["projectId"]
        if not run.job.checkpoints.get("published"):
            self.publish(run, semrush.client(), project_id)
        return {"promptCount": run.job.checkpoints["written"], "projectId": project_id, "published": True,
                "verdict": "ship"}

    # -- phase 1 --------------------------------------------------------------------------------------
    def generate(self, run: JobRun) -> dict:
        run.checkpoint(phase=c.PHASE_GENERATING)
        try:
            with run.heartbeat():
                ship = drs.generate(run.job.params)
        except drs.DrsError as exc:
            log.info("DRS did not ship", extra={"code": exc.code, "reason": exc.reason})
            if exc.retryable:
                raise RetryableJobError(exc.code, exc.reason) from None
            raise TerminalJobError(exc.code, exc.reason) from None
        batch = {"prompts": ship.prompts, "summary": ship.summary}
        run.checkpoint(phase=c.PHASE_GENERATED, batch=batch, batchSize=len(ship.prompts))
        return batch

    # -- phase 2 --------------------------------------------------------------------------------------
    def semrush_for(self, run: JobRun) -> SemrushClient:
        """A Semrush client on a fresh write-scoped access token. Never inside a transaction.

        1. Confirm the lease: a worker that lost the job must not exchange (IMS would rotate away the
           token the job's new owner holds).
        2. Load the grant; none, or one no key opens -> NEEDS_REAUTH.
        3. Exchange at IMS, once. Refused -> NEEDS_REAUTH (naming a lost rotation when an earlier
           exchange's answer was lost). An answer that may have been lost after IMS rotated the token ->
           checkpoint `exchangeInDoubt` and retry later, never in place. Not reached -> retry later.
        4. The token must be the requester's: otherwise its rotated successor is invalidated and the job
           ends NEEDS_REAUTH without any Semrush call.
        5. Store the rotated token, fenced on the lease and on the grant (JobRun.store_rotated_token): a
           failed fence invalidates it and raises LeaseLost.
        """
        run.confirm()
        loaded = grants.grant_load(run.job.id)
        if loaded is None:
            raise self.needs_reauth("The job has no usable stored credential.")
        in_doubt = run.job.checkpoints.get(EXCHANGE_IN_DOUBT) == loaded.fingerprint
        try:
            exchanged = grants.promise_exchange(pair=loaded.pair, token=loaded.token)
        except (NeedsReauth, InvalidPromiseToken):
            if in_doubt:
                raise self.needs_reauth("IMS refused the promise token: lost rotation (an earlier exchange's "
                                        "answer was lost after IMS had rotated the token).") from None
            raise self.needs_reauth("IMS refused the promise token.") from None
        except TransientError as exc:
            if exc.maybe_processed:
                run.checkpoint(**{EXCHANGE_IN_DOUBT: loaded.fingerprint})
            raise RetryableJobError(c.IMS_UNAVAILABLE, f"exchange failed: {exc}") from None
        except ClientError as exc:
            raise TerminalJobError(c.IMS_EXCHANGE_REJECTED, f"exchange refused: {exc}") from None
        if exchanged.user_id != run.job.user_id:
            grants.promise_invalidate_quietly(pair=loaded.pair, token=exchanged.rotated, job_id=run.job.id)
            raise self.needs_reauth("The promise token belongs to another user than the job's requester.")
        run.store_rotated_token(exchanged=loaded, rotated=exchanged.rotated, **{EXCHANGE_IN_DOUBT: None})
        return SemrushClient(exchanged.access.access_token,
                             deadline=time.monotonic() + settings.SEMRUSH_WRITE_BUDGET_SECONDS)

    def write(self, run: JobRun, semrush: SemrushClient, prompts: list[str]) -> None:
        params = run.job.params
        try:
            project = semrush.find_project(workspace_id=params["workspaceId"], geo_target_id=params["geoTargetId"],
                                           language_code=params["languageCode"])
            if project is None:
                raise RetryableJobError(c.SEMRUSH_PROJECT_MISSING, "The market's Semrush project does not exist yet.")
            run.checkpoint(phase=c.PHASE_WRITING, projectId=project["id"])
            tags = semrush.ensure_tags(workspace_id=params["workspaceId"],
                                       wanted={"source": ["semrush"], "origin": ["ai"]})
            present = {p.get("text") for p in semrush.list_prompts(project_id=project["id"])}
            missing = [p for p in prompts if p not in present]
            run.confirm()  # fence: the writes below happen only while the lease is ours
            if missing:
                semrush.write_prompts(project_id=project["id"], user_id=run.job.user_id or "", prompts=[
                    {"text": text, "tagIds": [tags[SOURCE_TAG], tags[ORIGIN_TAG]]} for text in missing])
        except TransientError as exc:
            raise RetryableJobError(c.SEMRUSH_UNAVAILABLE, f"Semrush failed: {exc}") from None
        except ReauthRequired:
            raise self.needs_reauth("Semrush refused the access token.") from None
        except PermanentError as exc:
            raise TerminalJobError(c.SEMRUSH_REJECTED, f"Semrush refused the write: HTTP {exc.status}") from None
        run.checkpoint(phase=c.PHASE_WRITTEN, written=len(prompts), writtenNew=len(missing))

    # -- phase 3 --------------------------------------------------------------------------------------
    def publish(self, run: JobRun, semrush: SemrushClient, project_id: str) -> None:
        run.confirm()  # fence: never publish for a job another delivery owns
        try:
            semrush.publish(project_id=project_id)
        except (TransientError, PermanentError) as exc:
            raise RetryableJobError(c.SEMRUSH_PUBLISH_FAILED, f"publish failed: {exc}") from None
        except ReauthRequired:
            raise self.needs_reauth("Semrush refused the access token at publish.") from None
        run.checkpoint(phase=c.PHASE_PUBLISHED, published=True)

    @staticmethod
    def needs_reauth(message: str) -> TerminalJobError:
        return TerminalJobError(c.NEEDS_REAUTH, message, needs_reauth=True)


registry.register(c.MARKET_GENERATION_JOB_TYPE, MarketGenerationHandler())
