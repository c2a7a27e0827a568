"""Job services: enqueue (the producer's unit of work), publish, run, retry, re-authorise, operate.

Every interface (entry points, the Celery task, admin actions, runbook commands) calls these.
"""
import logging
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from jobs import registry, states
from jobs.exceptions import LeaseLost, RetryableJobError, TerminalJobError
from jobs.leases import JobRun, lease_claim, lease_release, lease_release_stale
from jobs.models import AsyncJob
from serenity import context, metrics
from serenity.clients.guard import outside_transaction
from serenity.problems import DomainError
from tokens import services as grants
from tokens.pairs import ClientPair
from tokens.types import InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)

UNKNOWN_JOB_TYPE = "UNKNOWN_JOB_TYPE"
ENQUEUE_FAILED = "ENQUEUE_FAILED"
RETRIES_EXHAUSTED = "RETRIES_EXHAUSTED"
NEEDS_REAUTH = "NEEDS_REAUTH"
OPERATOR_FAILED = "OPERATOR_FAILED"


class NotAwaitingReauth(DomainError):
    status, code, title = 409, "job_not_awaiting_reauth", "Job is not awaiting re-authentication"


class NotRequester(DomainError):
    status, code, title = 403, "not_job_requester", "Only the user who started the job may re-authorise it"


@dataclass
class Enqueued:
    job_id: str
    reused: bool
    sent: bool | None = None  # None until the message left (after commit)


# --- Publishing ------------------------------------------------------------------------------------

def _send(job_id, job_type: str, *, delay: int = 0) -> None:
    """Put `{jobId, type}` on the market-jobs queue. Raises whatever the transport raises."""
    from jobs.tasks import run_job_task

    outside_transaction("sqs.send")  # kombu's send is a network call like any other
    options = {"queue": settings.MARKET_JOBS_QUEUE}
    if delay:
        options["DelaySeconds"] = min(int(delay), 900)  # SQS's per-message delay limit
    run_job_task.apply_async(kwargs={"jobId": str(job_id), "type": job_type}, **options)


def job_publish(job_id, job_type: str, *, delay: int = 0, first: bool = False) -> bool:
    """Send the job's message and record that it went out. Returns True when sent.

    When the send fails: a job's `first` message (the producer's) ends the job FAILED ENQUEUE_FAILED and
    invalidates its token, so the entry point can answer without a handle; a re-send (re-authorisation,
    sweeper, operator) leaves the job IN_PROGRESS with `message_sent_at` cleared, for the sweeper to send
    again. Either way no job stays IN_PROGRESS with nothing queued and nobody to notice.
    """
    try:
        _send(job_id, job_type, delay=delay)
    except Exception as exc:
        log.warning("job message could not be sent", extra={"job_id": str(job_id), "reason": type(exc).__name__})
        if first:
            _end(job_id, to=states.FAILED, event="enqueue_failed", detail=type(exc).__name__,
                 extra_filter={"lease_token__isnull": True},
                 error=states.error_doc(ENQUEUE_FAILED, "The job could not be queued.", retryable=True),
                 error_code=ENQUEUE_FAILED)
        else:
            AsyncJob.objects.filter(id=job_id, status=states.IN_PROGRESS).update(message_sent_at=None)
            states.record(job_id, "send_failed", detail=f"{type(exc).__name__}; the sweeper will re-send")
        return False
    AsyncJob.objects.filter(id=job_id).update(message_sent_at=timezone.now())
    states.record(job_id, "message_sent", detail=f"delayed {delay}s" if delay else "")
    return True


# --- Enqueue -----------------------------------------------------------------------------------------

def job_enqueue(
    *,
    job_id,
    job_type: str,
    organization_id,
    brand_id,
    site_id,
    user_id: str,
    params: dict,
    pair: ClientPair,
    obtain_token: Callable[[], PromiseToken],
) -> Enqueued:
    """Create (or reuse) the job with this id, store its credential and queue its message.

    1. A live (IN_PROGRESS) job with this id is reused: nothing minted, nothing sent.
    2. Otherwise obtain the credential (outside any transaction: it is a network call).
    3. In one transaction: insert the job, or replace a terminal one; store the encrypted grant.
       Losing a race to a concurrent producer means the other's live job is reused, and the token we
       obtained is invalidated.
    4. After commit, send `{jobId, type}` (job_publish); a failed send fails the job.
    Raises InvalidPromiseToken for an untyped credential, TokenAlreadyGranted when another job's grant
    holds the token (nothing written, the token left to its owner), and client errors from the mint.
    """
    if AsyncJob.objects.filter(id=job_id, status=states.IN_PROGRESS).exists():
        return Enqueued(job_id=str(job_id), reused=True)
    token = obtain_token()
    if not isinstance(token, PromiseToken):
        raise InvalidPromiseToken("enqueue needs a typed promise token")

    result = Enqueued(job_id=str(job_id), reused=False)
    try:
        with transaction.atomic():
            existing = AsyncJob.objects.select_for_update().filter(id=job_id).first()
            if existing is not None and existing.status == states.IN_PROGRESS:
                result.reused = True
            else:
                _write_fresh_job(existing, job_id=job_id, job_type=job_type, organization_id=organization_id,
                                 brand_id=brand_id, site_id=site_id, user_id=user_id, params=params)
                grants.grant_store(job_id=job_id, pair=pair, token=token)

                def publish():
                    result.sent = job_publish(job_id, job_type, first=True)

                transaction.on_commit(publish)
    except grants.TokenAlreadyGranted:
        raise  # the token is another job's: never invalidate it from here
    except IntegrityError:
        # A concurrent producer inserted the same id first and committed: theirs is the live job.
        if not AsyncJob.objects.filter(id=job_id, status=states.IN_PROGRESS).exists():
            grants.promise_invalidate_quietly(pair=pair, token=token, job_id=job_id)
            raise
        result.reused = True
    if result.reused:
        grants.promise_invalidate_quietly(pair=pair, token=token, job_id=job_id)
    return result


def _write_fresh_job(existing, *, job_id, job_type, organization_id, brand_id, site_id, user_id, params):
    now = timezone.now()
    fresh = {
        "job_type": job_type, "organization_id": organization_id, "brand_id": brand_id, "site_id": site_id,
        "user_id": user_id, "params": params, "phase": "queued", "checkpoints": {}, "result": None,
        "error": None, "error_code": None, "lease_token": None, "lease_expires_at": None, "attempts": 0,
        "message_sent_at": None, "created_at": now, "started_at": None,
        "expires_at": now + timedelta(days=settings.JOB_RECORD_TTL_DAYS),
    }
    if existing is None:
        AsyncJob.objects.create(id=job_id, status=states.IN_PROGRESS, updated_at=now, **fresh)
        states.record(job_id, "created", actor=user_id or "")
    else:
        states.transition(job_id, to=states.IN_PROGRESS, expect=states.TERMINAL, event="replaced",
                          actor=user_id or "", detail=f"replaced a {existing.status} job", **fresh)


# --- Running -----------------------------------------------------------------------------------------

def retry_delay(attempt: int) -> int:
    """Exponential backoff for the `attempt`-th failure, capped by SQS's 900 s delay limit."""
    return int(min(settings.JOB_RETRY_MAX_SECONDS, 900, settings.JOB_RETRY_BASE_SECONDS * math.pow(2, attempt - 1)))


def _count_outcome(outcome: str) -> None:
    """Per-outcome count (EMF): JobsCompleted / JobsFailed / JobsRetried / JobsDropped / JobsStopped."""
    kind = outcome.split(":", 1)[0]
    name = {"completed": "JobsCompleted", "failed": "JobsFailed", "retry": "JobsRetried",
            "dropped": "JobsDropped", "stopped": "JobsStopped"}.get(kind)
    if name:
        metrics.emit(**{name: (1, metrics.COUNT)})


def job_run(job_id, message_type: str | None, *, worker: str = "") -> str:
    """Run one delivery of a job message. Returns what happened (for logs and tests).

    1. Missing job, or not IN_PROGRESS: drop the message (a duplicate delivery).
    2. Message type contradicting the stored type: drop, leave the job untouched.
    3. No handler for the stored type: FAILED UNKNOWN_JOB_TYPE.
    4. Claim the lease (one conditional UPDATE); lost claim: drop. A claim error propagates, so the
       message is not acked and comes back (fail closed).
    5. Run the handler under the lease; its outcome decides COMPLETED, FAILED or a delayed retry.
    """
    token = context.job_id.set(str(job_id))
    try:
        outcome = _job_run(job_id, message_type, worker=worker)
        _count_outcome(outcome)
        return outcome
    finally:
        context.job_id.reset(token)


def _job_run(job_id, message_type, *, worker):
    try:
        job_id = uuid.UUID(str(job_id))
    except ValueError:
        log.error("message with a malformed job id dropped")
        return "dropped:malformed"
    job = AsyncJob.objects.filter(id=job_id).first()
    if job is None:
        log.info("message for a missing job dropped")
        return "dropped:missing"
    if job.status != states.IN_PROGRESS:
        log.info("message for a finished job dropped", extra={"status": job.status})
        return "dropped:not_in_progress"
    if message_type != job.job_type:
        log.error("message type contradicts the stored job type; dropped",
                  extra={"message_type": str(message_type)[:64], "stored_type": job.job_type})
        return "dropped:type_mismatch"
    handler = registry.get(job.job_type)
    if handler is None:
        _finish_failed(job_id, None, TerminalJobError(UNKNOWN_JOB_TYPE, "No handler for this job type."), worker)
        return "failed:" + UNKNOWN_JOB_TYPE

    lease = lease_claim(job_id, worker=worker)
    if lease is None:
        log.info("lease held by another delivery; message dropped")
        states.record(job_id, "delivery_dropped", actor=worker, detail="lease held by another delivery")
        return "dropped:lease_held"
    job.refresh_from_db()
    run = JobRun(job, lease, worker=worker)
    if job.attempts > settings.JOB_MAX_ATTEMPTS:
        _finish_failed(job_id, lease, _exhausted("attempts exhausted (repeated crashes)"), worker)
        return "failed:" + RETRIES_EXHAUSTED

    try:
        result = handler.run(run)
    except LeaseLost:
        return "stopped:lease_lost"
    except TerminalJobError as exc:
        return "failed:" + (_finish_failed(job_id, lease, exc, worker) or "lease_lost")
    except RetryableJobError as exc:
        return _retry_or_exhaust(run, exc)
    except Exception as exc:
        # Unexpected (a bug, a database error): give the lease back so the redelivery of this message,
        # which is not acked, can claim the job instead of finding it held and dropping it.
        lease_release(job_id, lease, reason=f"unexpected {type(exc).__name__}")
        raise
    if _end(job_id, to=states.COMPLETED, lease_token=lease, event="completed", actor=worker, result=result,
            error=None, error_code=None):
        return "completed"
    log.warning("lease lost before the job could complete")
    return "stopped:lease_lost"


def _exhausted(reason: str) -> TerminalJobError:
    return TerminalJobError(RETRIES_EXHAUSTED, reason, retryable=True)


def _finish_failed(job_id, lease, exc: TerminalJobError, actor: str) -> str | None:
    """FAILED with the error's code; the grant goes with it and its token is invalidated."""
    moved = _end(job_id, lease_token=lease, to=states.FAILED, event="failed", actor=actor,
                 detail=f"{exc.code}: {exc.message}",
                 error=states.error_doc(exc.code, exc.message, retryable=exc.retryable, needs_reauth=exc.needs_reauth),
                 error_code=exc.code)
    if not moved:
        return None
    log.info("job failed", extra={"code": exc.code})
    return exc.code


def _end(job_id, **transition) -> bool:
    """Move a job to a terminal state and delete its grant in the same transaction (a finished job never
    holds a credential), then invalidate the token at IMS, best effort, after commit."""
    with transaction.atomic():
        moved = states.transition(job_id, **transition)
        taken = grants.grant_take(job_id) if moved else None
    if taken is not None:
        taken.invalidate()
    return moved


def _retry_or_exhaust(run: JobRun, exc: RetryableJobError) -> str:
    job_id, attempts = run.job.id, run.job.attempts
    if attempts >= settings.JOB_MAX_ATTEMPTS:
        _finish_failed(job_id, run.lease_token, _exhausted(f"{exc.code}: {exc.message}"), run.worker)
        return "failed:" + RETRIES_EXHAUSTED
    delay = retry_delay(attempts)
    # Release first, then send: if the send fails the exception propagates, the current message is not
    # acked and SQS redelivers it after the visibility timeout, so the job is never left unqueued.
    if not lease_release(job_id, run.lease_token, reason=f"retry in {delay}s: {exc.code}"):
        return "stopped:lease_lost"
    states.record(job_id, "retry_scheduled", actor=run.worker, detail=f"{exc.code}: {exc.message}"[:500])
    log.info("retryable failure; retry scheduled", extra={"code": exc.code, "delay": delay, "attempt": attempts})
    _send(job_id, run.job.job_type, delay=delay)
    AsyncJob.objects.filter(id=job_id).update(message_sent_at=timezone.now())
    states.record(job_id, "message_sent", actor=run.worker, detail=f"delayed {delay}s")
    return f"retry:{exc.code}"


# --- Re-authorisation ----------------------------------------------------------------------------------

def job_reauthorize(*, job_id, user_id: str, pair: ClientPair, obtain_token: Callable[[], PromiseToken]) -> AsyncJob:
    """Give a job awaiting re-authorisation a new credential and queue the same job id again.

    1. Only the requester (403), only a job FAILED with NEEDS_REAUTH (409).
    2. Claim the re-authorisation: one conditional UPDATE on the job row. Of concurrent calls exactly one
       wins; the others get 409 and obtain nothing. A claim expires (JOB_REAUTH_CLAIM_SECONDS), so a
       process that dies while holding it does not block the job for good.
    3. Obtain the credential outside any transaction (a network call). If that fails, the claim is given
       back and the job awaits re-authorisation as before; the error propagates.
    4. One short transaction fenced on the claim: FAILED -> IN_PROGRESS, store the grant, send after
       commit. A claim lost meanwhile (it expired and another call took it) leaves the job alone and
       invalidates the credential just obtained (NotAwaitingReauth).
    Raises AsyncJob.DoesNotExist, NotRequester, NotAwaitingReauth, and what `obtain_token` raises.
    """
    job = AsyncJob.objects.get(id=job_id)
    if not job.user_id or job.user_id != user_id:
        raise NotRequester()
    if job.status != states.FAILED or job.error_code != NEEDS_REAUTH:
        raise NotAwaitingReauth(f"Job {job.id} is {job.status}.")
    claim = _reauth_claim(job.id, user_id)
    if claim is None:
        raise NotAwaitingReauth(f"Job {job.id} is already being re-authorised, or no longer awaits it.")
    try:
        token = obtain_token()
    except BaseException:
        _reauth_release(job.id, claim)
        raise
    try:
        with transaction.atomic():
            moved = states.transition(
                job.id, to=states.IN_PROGRESS, expect=states.FAILED, event="reauthorized", actor=user_id,
                extra_filter={"reauth_claim": claim}, reauth_claim=None, reauth_claim_expires_at=None,
                error=None, error_code=None, message_sent_at=None, attempts=0,
                expires_at=timezone.now() + timedelta(days=settings.JOB_RECORD_TTL_DAYS))
            if moved:
                grants.grant_store(job_id=job.id, pair=pair, token=token)
                transaction.on_commit(lambda: job_publish(job.id, job.job_type))
    except grants.TokenAlreadyGranted:
        _reauth_release(job.id, claim)
        raise
    if not moved:
        grants.promise_invalidate_quietly(pair=pair, token=token, job_id=job.id)
        raise NotAwaitingReauth(f"Job {job.id} was re-authorised by another request.")
    job.refresh_from_db()
    return job


def _reauth_claim(job_id, user_id: str):
    """Take the job's re-authorisation claim; the claim token, or None when another call holds a live one
    or the job no longer awaits re-authorisation."""
    now = timezone.now()
    claim = uuid.uuid4()
    taken = (
        AsyncJob.objects.filter(id=job_id, status=states.FAILED, error_code=NEEDS_REAUTH, user_id=user_id)
        .filter(Q(reauth_claim__isnull=True) | Q(reauth_claim_expires_at__lte=now))
        .update(reauth_claim=claim, reauth_claim_expires_at=now + timedelta(seconds=settings.JOB_REAUTH_CLAIM_SECONDS))
    )
    return claim if taken == 1 else None


def _reauth_release(job_id, claim) -> None:
    AsyncJob.objects.filter(id=job_id, reauth_claim=claim).update(reauth_claim=None, reauth_claim_expires_at=None)


# --- Operators -----------------------------------------------------------------------------------------

def job_mark_failed(job_id, *, code: str, reason: str, actor: str) -> bool:
    """Operator: end an IN_PROGRESS job as FAILED (token invalidated, grant deleted). False if not running."""
    return _end(job_id, to=states.FAILED, event="marked_failed", actor=actor, detail=f"{code}: {reason}",
                error=states.error_doc(code, reason), error_code=code)


def job_release_stale_lease(job_id, *, actor: str) -> bool:
    return lease_release_stale(job_id, actor=actor)


def job_requeue(job_id, *, actor: str) -> bool:
    """Operator: send a stuck job's message again. Only an IN_PROGRESS job without a live lease; an expired
    lease (its worker died) is cleared first, so the job reads as waiting again."""
    now = timezone.now()
    job = AsyncJob.objects.filter(id=job_id, status=states.IN_PROGRESS).first()
    if job is None or (job.lease_token and job.lease_expires_at and job.lease_expires_at > now):
        return False
    if job.lease_token:
        lease_release_stale(job_id, actor=actor)
    states.record(job_id, "requeued", actor=actor)
    return job_publish(job.id, job.job_type)


def unsent_jobs(*, grace_seconds: int | None = None):
    """IN_PROGRESS jobs whose message never went out, past the grace period (a crash between commit
    and send)."""
    cutoff = timezone.now() - timedelta(seconds=settings.JOB_ENQUEUE_GRACE_SECONDS if grace_seconds is None
                                        else grace_seconds)
    return AsyncJob.objects.filter(status=states.IN_PROGRESS, message_sent_at__isnull=True, lease_token__isnull=True,
                                   updated_at__lte=cutoff).order_by("created_at")


def sweep_unsent(*, grace_seconds: int | None = None, apply: bool = True, actor: str = "sweeper") -> list:
    """Re-publish jobs whose message was never confirmed sent. A duplicate is harmless (the lease)."""
    jobs = list(unsent_jobs(grace_seconds=grace_seconds))
    if apply:
        for job in jobs:
            states.record(job.id, "republished", actor=actor, detail="message never confirmed sent")
            job_publish(job.id, job.job_type)
    return jobs
