"""The market-generation job handler: DRS prompts -> Semrush project -> publish (SPEC §5.4-5.7).

Registered with the job runner at start-up (markets.apps). Each phase ends in a checkpoint fenced on the
lease, so a redelivery resumes where the last holder stopped:

1. generate: unless a batch is persisted, call DRS (lease confirmed by a heartbeat) and persist the
   batch before anything else. DRS is never called twice for a job.
2. write: exchange the promise token under the locked lease (IMS rotates it: the new one is stored
   before the access token is used), resolve the market's project, ensure the `source`/`origin` tags,
   read what the project already holds and write only the missing prompts (a crash between the write
   and its checkpoint cannot duplicate a prompt), then checkpoint `written`.
3. publish: publish the project (retryable: the writes are checkpointed) and return the result.
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


def usable_prompts(batch: dict) -> list[str]:
    """The batch's prompt texts trimmed, with empties and exact duplicates dropped, in order."""
    seen, out = set(), []
    for item in batch.get("prompts") or []:
        text = item.get("prompt") if isinstance(item, dict) else None
        if isinstance(text, str) and text.strip() and text.strip() not in seen:
            seen.add(text.strip())
            out.append(text.strip())
    return out


class MarketGenerationHandler:
    def run(self, run: JobRun) -> dict:
        batch = run.job.checkpoints.get("batch")
        if batch is None:
            batch = self.generate(run)
        prompts = usable_prompts(batch)
        if not prompts:
            raise TerminalJobError(c.PROMPT_GENERATION_EMPTY, "DRS shipped no usable prompt.")
        semrush = self.semrush_for(run)
        if run.job.checkpoints.get("written") is None:
            self.write(run, semrush, prompts)
        project_id = run.job.checkpoints["projectId"]
        if not run.job.checkpoints.get("published"):
            run.confirm()  # fence: never publish for a job another delivery owns
            try:
                semrush.publish(project_id=project_id)
            except (TransientError, PermanentError) as exc:
                raise RetryableJobError("SEMRUSH_PUBLISH_FAILED", f"publish failed: {type(exc).__name__}") from None
            except ReauthRequired:
                raise self.needs_reauth("Semrush refused the access token at publish.") from None
            run.checkpoint(phase=c.PHASE_PUBLISHED, published=True)
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
        """A Semrush client on a fresh write-scoped access token.

        The exchange runs with the job row locked under our lease: IMS rotates the promise token on every
        exchange, so a worker that lost the job must not exchange at all (it would void the token the new
        owner holds), and the rotated token is stored before the lock is released. Holding a row lock over
        a network call is deliberate here; the IMS client's timeouts bound it.
        """
        with run.fenced_atomic():
            loaded = grants.grant_load_quietly(run.job.id)
            if loaded is None:
                raise self.needs_reauth("The job has no usable stored credential.")
            pair, promise = loaded
            try:
                access, rotated = grants.promise_exchange(pair=pair, token=promise)
            except (NeedsReauth, InvalidPromiseToken):
                raise self.needs_reauth("IMS refused the promise token.") from None
            except TransientError as exc:
                raise RetryableJobError("IMS_UNAVAILABLE", f"exchange failed: {type(exc).__name__}") from None
            except ClientError as exc:
                raise TerminalJobError("IMS_EXCHANGE_REJECTED", f"exchange refused: {type(exc).__name__}") from None
            grants.grant_rotate(job_id=run.job.id, token=rotated)
        return SemrushClient(access.access_token, deadline=time.monotonic() + settings.SEMRUSH_WRITE_BUDGET_SECONDS)

    def write(self, run: JobRun, semrush: SemrushClient, prompts: list[str]) -> None:
        params = run.job.params
        try:
            project = semrush.find_project(workspace_id=params["workspaceId"], geo_target_id=params["geoTargetId"],
                                           language_code=params["languageCode"])
            if project is None:
                raise RetryableJobError("SEMRUSH_PROJECT_MISSING", "The market's Semrush project does not exist yet.")
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
            raise RetryableJobError("SEMRUSH_UNAVAILABLE", f"Semrush failed: {type(exc).__name__}") from None
        except ReauthRequired:
            raise self.needs_reauth("Semrush refused the access token.") from None
        except PermanentError as exc:
            raise TerminalJobError(c.SEMRUSH_REJECTED, f"Semrush refused the write: HTTP {exc.status}") from None
        run.checkpoint(phase=c.PHASE_WRITTEN, written=len(prompts), writtenNew=len(missing))

    @staticmethod
    def needs_reauth(message: str) -> TerminalJobError:
        return TerminalJobError(c.NEEDS_REAUTH, message, needs_reauth=True)


registry.register(c.MARKET_GENERATION_JOB_TYPE, MarketGenerationHandler())
