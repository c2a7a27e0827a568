"""Producing job messages: enqueue a job with its credential, publish its message, re-authorise it.

Each service commits its rows first and sends after, outside any transaction, and reports what it sent.
"""

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from jobs import codes, retries, states
from jobs.exceptions import NotAwaitingReauth, NotRequester
from jobs.messages import RUN_TASK, message_kwargs
from jobs.models import AsyncJob, JobStatus, default_expires_at
from jobs.services.endings import job_finish
from serenity import tracing
from serenity.celery import app as celery_app
from serenity.clients.guard import outside_transaction, require_no_transaction
from serenity.db import DISCONNECTED, retry_once_on_disconnect
from tokens import services as grants
from tokens.pairs import ClientPair
from tokens.types import InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Enqueued:
    """What `job_enqueue` did: the job id, whether a live job was reused, and whether a message was sent
    (False: the first send failed and the job ended ENQUEUE_FAILED; a reused job sends nothing)."""

    job_id: str
    reused: bool
    sent: bool


# --- Publishing ------------------------------------------------------------------------------------------


def _send(job_id: uuid.UUID | str, job_type: str, *, delay: int = 0) -> None:
    """Put `{jobId, type}` on the market-jobs queue. Raises whatever the transport raises.

    The trace goes along beside the body, never in it: W3C `traceparent` as SQS message attributes (for anything
    reading the queue or the DLQ), and as Celery headers (the worker's instrumentation continues the trace)."""
    outside_transaction("sqs.send")  # kombu's send is a network call like any other
    tracing.set_attributes(**{"job.id": job_id, "job.type": job_type})
    options: dict[str, Any] = {
        "queue": settings.MARKET_JOBS_QUEUE,
        "message_attributes": {
            name: {"DataType": "String", "StringValue": value} for name, value in tracing.inject().items()
        },
    }
    if delay:
        options["DelaySeconds"] = min(int(delay), retries.SQS_MAX_DELAY_SECONDS)
    with tracing.contained():
        celery_app.send_task(RUN_TASK, kwargs=message_kwargs(job_id, job_type), **options)


def job_publish(job_id: uuid.UUID | str, job_type: str, *, delay: int = 0, first: bool = False) -> bool:
    """Send the job's message and record that it went out. Returns True when sent.

    When the send fails: a job's `first` message (the producer's) ends the job FAILED ENQUEUE_FAILED and
    invalidates its token, so the entry point can answer without a handle; a re-send (re-authorisation,
    sweeper, operator, retry) leaves the job IN_PROGRESS with `message_sent_at` cleared, for the sweeper to
    send again. Either way no job stays IN_PROGRESS with nothing queued and nobody to notice.
    """
    # A worker may receive the message and record its claim before the send call returns here: the send is
    # dated when it began, so that the history (and the waterfall drawn from it) never shows a claim before it.
    sending_at = timezone.now()
    try:
        _send(job_id, job_type, delay=delay)
    except Exception as exc:
        log.warning("job message could not be sent", extra={"job_id": str(job_id), "reason": type(exc).__name__})
        if first:
            job_finish(
                job_id,
                to=JobStatus.FAILED,
                event="enqueue_failed",
                detail=type(exc).__name__,
                extra_filter={"lease_token__isnull": True},
                error=states.error_doc(codes.ENQUEUE_FAILED, "The job could not be queued.", retryable=True),
            )
        else:
            AsyncJob.objects.filter(id=job_id, status=JobStatus.IN_PROGRESS).update(message_sent_at=None)
            states.record(job_id, "send_failed", detail=f"{type(exc).__name__}; the sweeper will re-send")
        return False
    AsyncJob.objects.filter(id=job_id).update(
        message_sent_at=sending_at,
        runnable_at=sending_at + timedelta(seconds=min(delay, retries.SQS_MAX_DELAY_SECONDS)),
    )
    states.record(job_id, "message_sent", detail=f"delayed {delay}s" if delay else "", at=sending_at)
    return True


# --- Enqueue ---------------------------------------------------------------------------------------------


def job_enqueue(
    *,
    job_id: uuid.UUID,
    job_type: str,
    organization_id: uuid.UUID,
    brand_id: uuid.UUID | None,
    site_id: uuid.UUID | None,
    user_id: str,
    params: dict[str, Any],
    pair: ClientPair,
    obtain_token: Callable[[], PromiseToken],
) -> Enqueued:
    """Create (or reuse) the job with this id, store its credential and queue its message.

    1. A live (IN_PROGRESS) job with this id is reused: nothing obtained, nothing sent.
    2. A finished job with this id is replaced (a regeneration): first its reopen lock is taken, by one
       conditional UPDATE, so of concurrent producers exactly one obtains a credential; the others reuse what
       it makes.
    3. Obtain the credential (outside any transaction: it is a network call). On failure the lock is
       given back and the error propagates.
    4. In one transaction: insert the job, or replace the finished one (fenced on the lock); store the
       encrypted grant, taking over from a credential the old job had retained. Losing a race to a
       concurrent producer means the other's live job is reused, and the token we obtained is invalidated.
       A write that fails otherwise (the database connection cut) invalidates it too, unless the grant turns out
       to hold it (the commit landed, its answer lost): a token is never left live with no owner.
    5. After the commit, send `{jobId, type}` (job_publish); a failed first send fails the job. A retained
       credential the new one replaced is invalidated.
    Never inside a caller's transaction (NetworkCallInTransaction): the message must leave after the rows
    commit. Raises InvalidPromiseToken for an untyped credential, TokenAlreadyGranted when another job's
    grant holds the token (nothing written, the token left to its owner), and client errors from the mint.
    """
    require_no_transaction("job_enqueue")
    tracing.set_attributes(**{"job.id": job_id, "job.type": job_type, "organization.id": organization_id})
    existing = AsyncJob.objects.filter(id=job_id).first()
    if existing is not None and existing.status == JobStatus.IN_PROGRESS:
        return Enqueued(job_id=str(job_id), reused=True, sent=False)
    lock = None
    if existing is not None:
        lock = reopen_lock_take(job_id, Q(status__in=states.TERMINAL))
        if lock is None:
            return Enqueued(job_id=str(job_id), reused=True, sent=False)  # another request is replacing it
    try:
        token = obtain_token()
        if not isinstance(token, PromiseToken):
            raise InvalidPromiseToken("enqueue needs a typed promise token")
    except BaseException:
        if lock is not None:
            reopen_lock_release(job_id, lock)
        raise

    reused, replaced = False, None
    try:
        with transaction.atomic():
            current = AsyncJob.objects.select_for_update().filter(id=job_id).first()
            if current is not None and (current.status == JobStatus.IN_PROGRESS or current.reopen_lock != lock):
                reused = True
            else:
                _write_fresh_job(
                    current,
                    job_id=job_id,
                    job_type=job_type,
                    organization_id=organization_id,
                    brand_id=brand_id,
                    site_id=site_id,
                    user_id=user_id,
                    params=params,
                )
                replaced = grants.grant_take(job_id) if current is not None else None
                grants.grant_store(job_id=job_id, pair=pair, token=token)
    except grants.TokenAlreadyGranted:
        if lock is not None:
            reopen_lock_release(job_id, lock)
        raise  # the token is another job's: never invalidate it from here
    except IntegrityError:
        # A concurrent producer inserted the same id first and committed: theirs is the live job.
        if not AsyncJob.objects.filter(id=job_id, status=JobStatus.IN_PROGRESS).exists():
            grants.promise_invalidate_quietly(pair=pair, token=token, job_id=job_id)
            raise
        reused = True
    except Exception:
        # The write failed (a connection cut by a failover): the token we obtained has no owner unless the commit
        # landed with its answer lost. Ended at IMS otherwise; the lock expires if the database is still away.
        if not grants.grant_holds_or_invalidate(job_id=job_id, pair=pair, token=token) and lock is not None:
            _reopen_lock_release_quietly(job_id, lock)
        raise
    if reused:
        grants.promise_invalidate_quietly(pair=pair, token=token, job_id=job_id)
        return Enqueued(job_id=str(job_id), reused=True, sent=False)
    if replaced is not None:
        replaced.invalidate()
    return Enqueued(job_id=str(job_id), reused=False, sent=job_publish(job_id, job_type, first=True))


def _write_fresh_job(
    existing: AsyncJob | None,
    *,
    job_id: uuid.UUID,
    job_type: str,
    organization_id: uuid.UUID,
    brand_id: uuid.UUID | None,
    site_id: uuid.UUID | None,
    user_id: str,
    params: dict[str, Any],
) -> None:
    now = timezone.now()
    fresh: dict[str, Any] = {
        "job_type": job_type,
        "organization_id": organization_id,
        "brand_id": brand_id,
        "site_id": site_id,
        "user_id": user_id,
        "params": params,
        "phase": "queued",
        "checkpoints": {},
        "result": None,
        "error": None,
        "error_code": None,
        "lease_token": None,
        "lease_expires_at": None,
        "attempts": 0,
        "lost_deliveries": 0,
        "throttles": 0,
        "message_sent_at": None,
        "created_at": now,
        "started_at": None,
        "reopen_lock": None,
        "reopen_lock_expires_at": None,
        "expires_at": default_expires_at(now),
    }
    if existing is None:
        AsyncJob.objects.create(id=job_id, status=JobStatus.IN_PROGRESS, updated_at=now, **fresh)
        states.record(job_id, "created", actor=user_id or "")
    else:
        states.transition(
            job_id,
            to=JobStatus.IN_PROGRESS,
            expect=states.TERMINAL,
            event="replaced",
            actor=user_id or "",
            detail=f"replaced a {existing.status} job",
            **fresh,
        )


# --- Re-authorisation --------------------------------------------------------------------------------------


def job_reauthorize(
    *, job_id: uuid.UUID | str, user_id: str, pair: ClientPair, obtain_token: Callable[[], PromiseToken]
) -> AsyncJob:
    """Give a job awaiting re-authorisation a new credential and queue the same job id again.

    1. Only the requester (403), only a job FAILED with NEEDS_REAUTH (409).
    2. Take the job's reopen lock: one conditional UPDATE on the job row. Of concurrent calls exactly one
       wins; the others get 409 and obtain nothing. The lock expires (JOB_REOPEN_LOCK_SECONDS), so a
       process that dies while holding it does not block the job for good.
    3. Obtain the credential outside any transaction (a network call). If that fails, the lock is given
       back and the job awaits re-authorisation as before; the error propagates.
    4. One short transaction fenced on the lock: FAILED -> IN_PROGRESS, store the grant; send after the
       commit. A lock lost meanwhile (it expired and another call took it) leaves the job alone and
       invalidates the credential just obtained (NotAwaitingReauth); so does a write that fails (the database
       connection cut), unless the grant turns out to hold the credential (the commit landed, its answer lost).
    Raises AsyncJob.DoesNotExist, NotRequester, NotAwaitingReauth, and what `obtain_token` raises.
    """
    require_no_transaction("job_reauthorize")
    job = AsyncJob.objects.get(id=job_id)
    tracing.set_attributes(**{"job.id": job.id, "job.type": job.job_type, "organization.id": job.organization_id})
    if not job.user_id or job.user_id != user_id:
        raise NotRequester()
    if job.status != JobStatus.FAILED or job.error_code != codes.NEEDS_REAUTH:
        raise NotAwaitingReauth(f"Job {job.id} is {job.status}.")
    lock = reopen_lock_take(job.id, Q(status=JobStatus.FAILED, error_code=codes.NEEDS_REAUTH, user_id=user_id))
    if lock is None:
        raise NotAwaitingReauth(f"Job {job.id} is already being re-authorised, or no longer awaits it.")
    try:
        token = obtain_token()
    except BaseException:
        reopen_lock_release(job.id, lock)
        raise
    try:
        with transaction.atomic():
            moved = states.transition(
                job.id,
                to=JobStatus.IN_PROGRESS,
                expect=JobStatus.FAILED,
                event="reauthorized",
                actor=user_id,
                extra_filter={"reopen_lock": lock},
                reopen_lock=None,
                reopen_lock_expires_at=None,
                error=None,
                error_code=None,
                message_sent_at=None,
                attempts=0,
                lost_deliveries=0,
                throttles=0,
                expires_at=default_expires_at(),
            )
            if moved:
                grants.grant_store(job_id=job.id, pair=pair, token=token)
    except grants.TokenAlreadyGranted:
        reopen_lock_release(job.id, lock)
        raise
    except Exception:
        # As in job_enqueue: a write cut mid-way leaves the token just obtained with no owner, unless it landed.
        if not grants.grant_holds_or_invalidate(job_id=job.id, pair=pair, token=token):
            _reopen_lock_release_quietly(job.id, lock)
        raise
    if not moved:
        grants.promise_invalidate_quietly(pair=pair, token=token, job_id=job.id)
        raise NotAwaitingReauth(f"Job {job.id} was re-authorised by another request.")
    job_publish(job.id, job.job_type)
    job.refresh_from_db()
    return job


def reopen_lock_take(job_id: uuid.UUID | str, condition: Q) -> uuid.UUID | None:
    """Lock a finished job for the one request that will put it back to work: one conditional UPDATE,
    where the job matches `condition` and holds no live reopen lock. The lock's token, or None when another
    request holds a live lock or the job no longer matches. A lock expires (JOB_REOPEN_LOCK_SECONDS),
    so a request that dies while holding it does not block the job for good."""
    now = timezone.now()
    lock = uuid.uuid4()
    taken = (
        AsyncJob.objects.filter(condition, id=job_id)
        .exclude(status=JobStatus.IN_PROGRESS)
        .filter(Q(reopen_lock__isnull=True) | Q(reopen_lock_expires_at__lte=now))
        .update(reopen_lock=lock, reopen_lock_expires_at=now + timedelta(seconds=settings.JOB_REOPEN_LOCK_SECONDS))
    )
    return lock if taken == 1 else None


def reopen_lock_release(job_id: uuid.UUID | str, lock: uuid.UUID) -> None:
    """Give the reopen lock back (only if it is still `lock`), so the next request may put the job back to work."""
    AsyncJob.objects.filter(id=job_id, reopen_lock=lock).update(reopen_lock=None, reopen_lock_expires_at=None)


def _reopen_lock_release_quietly(job_id: uuid.UUID | str, lock: uuid.UUID) -> None:
    """`reopen_lock_release` after a failed write, on a database that may still be away: a lock not given back
    expires (JOB_REOPEN_LOCK_SECONDS)."""
    try:
        retry_once_on_disconnect(reopen_lock_release, job_id, lock)
    except DISCONNECTED:
        log.warning("reopen lock not given back; it expires", extra={"job_id": str(job_id)})
