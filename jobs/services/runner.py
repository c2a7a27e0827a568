"""Running one delivery of a job message: drop, dispatch, claim, run the handler, and end or retry the job.

`job_run` returns the delivery's `Outcome`; the Celery task logs and counts it (jobs/outcomes.py).
"""

import logging
import threading
import time
import uuid
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F, Q

from jobs import codes, handlers, retries, states
from jobs.context import JobContext, worker_stopping
from jobs.exceptions import DeliveryNotStarted, JobFailed, LeaseLost, OutOfTime, RetryLater, Throttled, WorkerStopping
from jobs.leases import (
    crash_loop_within_reach,
    in_flight_budget_reached,
    job_parked,
    lease_claim,
    lease_free,
    lease_free_q,
    lease_park,
    lease_release,
)
from jobs.models import AsyncJob, JobStatus
from jobs.outcomes import COMPLETED, Outcome
from jobs.services.endings import job_finish
from jobs.services.producer import job_publish
from serenity import context, metrics, tracing
from serenity.compiled import CompiledRead
from serenity.db import DISCONNECTED, retry_once_on_disconnect, retry_write_once_on_disconnect

log = logging.getLogger(__name__)

# The job's row, read twice by every delivery (before and after its claim): compiled once (serenity/compiled.py).
_JOB = CompiledRead(lambda job_id: AsyncJob.objects.filter(id=job_id)[:1])

LEASE_LOST = Outcome("stopped", "lease_lost")
HELD_BACK = Outcome("held", "fair_share")
HELD_BACK_BUDGET = Outcome("held", "drs_budget")
STOPPED_HANDED_BACK = Outcome("retry", "WORKER_STOPPING")

# The deliveries this process is running, for a stopping worker to hand back (jobs/worker/stop.py).
_active: set[JobContext] = set()
_active_lock = threading.Lock()


def active_deliveries() -> list[JobContext]:
    with _active_lock:
        return list(_active)


PARKED = Outcome("parked", "crash_loop")
HANDED_BACK_DISCONNECTED = Outcome("retry", "DATABASE_UNAVAILABLE")
# A delivery the database dropped mid-run tries this many times, a second apart, to hand its job back.
HAND_BACK_TRIES = 4


def job_run(job_id: object, message_type: str | None, *, worker: str = "", final_receive: bool = False) -> Outcome:
    """Run one delivery of a job message `{jobId, type}`.

    1. Malformed id, missing job, or a job not IN_PROGRESS: drop the message (a duplicate delivery).
    2. Message type contradicting the stored type: drop, leave the job untouched.
    3. No handler for the stored type: FAILED UNKNOWN_JOB_TYPE.
    4. Crash-looping (jobs/leases.py `crash_loop_q`), already parked, or `final_receive` (the message's last
       receive before the DLQ): park it (`lease_park`), run nothing, ack the message.
    4b. Claim the lease (one conditional UPDATE, fair across organizations, within the fleet's DRS budget).
       Not claimed (`_unclaimed`): parked meanwhile, by this delivery or another one: as 4. Held back by the
       fairness rule or the budget: send the job again, delayed, and ack this message. Held by another
       delivery: drop. A claim error propagates, so the message is not acked and comes back (fail closed).
    5. Attempt budget already spent by earlier deliveries (a crash loop): FAILED RETRIES_EXHAUSTED.
    6. Run the handler under the lease: COMPLETED with its result, FAILED with its JobFailed, or, for
       RetryLater, what `retries.retry_decision` says (a delayed retry, or RETRIES_EXHAUSTED). Throttled
       (back-pressure): the attempt given back and the job sent again after the service's Retry-After,
       bounded, until JOB_MAX_THROTTLES throttles end it THROTTLED_TOO_LONG (`_throttled`). OutOfTime
       (the delivery's budget cannot fit the next phase) hands the job back at once: lease released, a
       fresh message sent.
    7. LeaseLost: stop. If no other delivery holds the job (the lease expired unclaimed, or it is still
       ours and a fence on the grant failed), release it and send a fresh message.
    A database failure at the first read (once more on a fresh connection), at parking, or during the claim
    when the job's row shows it did not commit, raises DeliveryNotStarted: the task makes its message visible
    again at once.
    A database failure mid-run (a failover) hands the job back as soon as the database answers again, within
    a few seconds: it resumes from its last checkpoint then, not after its message's visibility timeout. Any
    other unexpected exception gives the lease back and propagates: the unacked message is redelivered.
    Lease releases and job endings are retried once on a fresh connection if the database dropped this one
    meanwhile; a release whose answer was lost counts as done when the lease is free (`_release`).
    0. The worker is stopping (SIGTERM): claim nothing, raise DeliveryNotStarted (the task makes the message
       visible again at once, for a worker that is not stopping).
    A delivery leaving a drained call (DRS) while its worker stops, or about to enter one, hands its job back
    (WorkerStopping): lease released, the attempt given back, a fresh message sent.
    """
    token = context.job_id.set(str(job_id))
    try:
        return _job_run(job_id, message_type, worker=worker, final_receive=final_receive)
    finally:
        context.job_id.reset(token)


def _job_run(job_id: object, message_type: str | None, *, worker: str, final_receive: bool = False) -> Outcome:
    if worker_stopping():  # a message the stopping worker's last receive brought: nothing of it runs here
        raise DeliveryNotStarted("worker stopping: message handed back unclaimed")
    try:
        job_id = uuid.UUID(str(job_id))
    except ValueError:
        log.error("message with a malformed job id dropped")
        return Outcome("dropped", "malformed")
    try:
        # The delivery's first statement: a connection the database dropped is met here, before anything of
        # the job ran, and the read is tried once more on a fresh one.
        job = retry_once_on_disconnect(lambda: _JOB.first(job_id=job_id))
    except DISCONNECTED as exc:
        raise DeliveryNotStarted(f"database unavailable before the claim: {type(exc).__name__}") from exc
    if job is None:
        log.info("message for a missing job dropped")
        return Outcome("dropped", "missing")
    if job.status != JobStatus.IN_PROGRESS:
        log.info("message for a finished job dropped", extra={"status": job.status})
        return Outcome("dropped", "not_in_progress")
    if message_type != job.job_type:
        log.error(
            "message type contradicts the stored job type; dropped",
            extra={"message_type": str(message_type)[:64], "stored_type": job.job_type},
        )
        return Outcome("dropped", "type_mismatch")
    handler = handlers.get(job.job_type)
    if handler is None:
        return _fail(job_id, None, JobFailed(codes.UNKNOWN_JOB_TYPE, "No handler for this job type."), worker)

    # Any other delivery sends no parking UPDATE: a claim could not find its job crash-looping.
    may_park = final_receive or crash_loop_within_reach(job)
    if job.parked_at is not None or (may_park and _park(job_id, worker=worker, final_receive=final_receive)):
        log.warning("job parked, not run: its deliveries keep dying, or its message was on its last receive")
        return PARKED
    try:
        lease = lease_claim(job_id, worker=worker, fair_to=job.organization_id)
    except DISCONNECTED as exc:  # a read around the claim: nothing was claimed (`_claim` settles its own)
        raise DeliveryNotStarted(f"database unavailable at the claim: {type(exc).__name__}") from exc
    if lease is None:
        return _unclaimed(job, worker=worker)
    job = _JOB.first(job_id=job_id)
    if job is None:  # deleted under the lease just taken: as `refresh_from_db` would
        raise AsyncJob.DoesNotExist(f"job {job_id} deleted at its claim")
    tracing.set_attributes(
        **{
            "job.id": job.id,
            "job.type": job.job_type,
            "organization.id": job.organization_id,
            "job.attempt": job.attempts,
        }
    )
    ctx = JobContext(job, lease, worker=worker)
    if retries.budget_spent_before_run(job.attempts):
        return _fail(job_id, lease, _exhausted("attempts exhausted by earlier deliveries (repeated crashes)"), worker)

    with _active_lock:
        _active.add(ctx)
    try:
        result = handler.run(ctx)
    except LeaseLost:
        return _requeue_if_unowned(ctx)
    except JobFailed as exc:
        return _fail(job_id, lease, exc, worker)
    except RetryLater as exc:
        return _retry(ctx, exc)
    except Throttled as exc:
        return _throttled(ctx, exc)
    except OutOfTime as exc:
        return _hand_back(ctx, reason=exc.message, outcome=Outcome("retry", exc.code))
    except WorkerStopping as exc:
        log.info("delivery handed back: the worker stops", extra={"at": exc.message})
        return STOPPED_HANDED_BACK if hand_back(ctx, reason="worker stopping", stopping=True) else LEASE_LOST
    except DISCONNECTED as exc:
        if _hand_back_after_disconnect(ctx, exc):
            return HANDED_BACK_DISCONNECTED
        raise
    except Exception as exc:
        # Unexpected (a bug, a database error): give the lease back so the redelivery of this message,
        # which is not acked, can claim the job instead of finding it held and dropping it.
        retry_once_on_disconnect(lease_release, job_id, lease, reason=f"unexpected {type(exc).__name__}")
        raise
    finally:
        with _active_lock:
            _active.discard(ctx)
    if retry_once_on_disconnect(
        job_finish, job_id, to=JobStatus.COMPLETED, lease_token=lease, event="completed", actor=worker, result=result
    ):
        return COMPLETED
    log.warning("lease lost before the job could complete")
    return _requeue_if_unowned(ctx)


def hand_back(ctx: JobContext, *, reason: str, stopping: bool = False, spare_drained: bool = False) -> bool:
    """Give a running delivery's job back to the queue: release its lease (fenced: only if it is still
    ours) and send a fresh message, so another delivery resumes it from its last checkpoint at once. The
    delivery, if it goes on, finds its lease gone at its next write and stops. True when handed back.

    `stopping` (the worker stops): the attempt the delivery counted is given back, as the stop is no fault of
    the job's. `spare_drained`: a delivery inside a drained call (`JobContext.drained_call`) is left running
    (False), decided under the lock its end takes, so its checkpointed result is never lost to this hand-back."""
    with ctx.release_lock:
        if spare_drained and ctx.in_drained_call:
            return False
        if ctx.handed_back:
            return False
        fields: dict[str, Any] = {"attempts": F("attempts") - 1} if stopping else {}
        if not _release(ctx, reason=reason, **fields):
            return False
        ctx.handed_back = True
    job_publish(ctx.id, ctx.job.job_type)
    return True


def _park(job_id: uuid.UUID, *, worker: str, final_receive: bool = False) -> bool:
    """`lease_park`, retried once on a fresh connection if the database dropped this one; a first try that
    committed with its answer lost leaves the job parked, which the retry finds. A database failure on the
    retry too raises DeliveryNotStarted: nothing ran and the message comes back at once (on its final receive,
    SQS then moves it to the DLQ, whose lease-aware redrive finds the job IN_PROGRESS without a lease)."""
    try:
        return retry_write_once_on_disconnect(
            lambda: lease_park(job_id, worker=worker, final_receive=final_receive),
            first_try_landed=lambda: AsyncJob.objects.filter(id=job_id, parked_at__isnull=False).exists(),
        )
    except DISCONNECTED as exc:
        raise DeliveryNotStarted(f"database unavailable at parking: {type(exc).__name__}") from exc


def _unclaimed(job: AsyncJob, *, worker: str) -> Outcome:
    """The claim took nothing; why decides what this delivery does. Crash-looping now (its last delivery died
    between the first read and the claim): parked here. Free but for a rule (fairness, the DRS budget): held
    back, sent again. Parked by another delivery of it (a duplicate that read it first, or one on its final
    receive): nothing to run and nothing to send, as for a job found parked. Otherwise another delivery holds it:
    dropped."""
    if _park(job.id, worker=worker):
        return PARKED
    if lease_free(job.id):
        return _hold_back(job, over_budget=in_flight_budget_reached())
    if job_parked(job.id):
        log.warning("job parked, not run: another delivery of it parked it")
        return PARKED
    log.info("lease held by another delivery; message dropped")
    states.record(job.id, "delivery_dropped", actor=worker, detail="lease held by another delivery")
    return Outcome("dropped", "lease_held")


def _release(ctx: JobContext, *, reason: str, **fields: Any) -> bool:
    """Release this delivery's lease (`fields` set in the same UPDATE), retried once on a fresh connection if
    the database dropped this one. True when this delivery freed it: now, or by a first try that committed
    but whose answer was lost with its connection (the retry then finds the lease free, no later claim of the
    job, and no hand-back of this delivery that freed it instead). False otherwise."""

    def freed_by_our_first_try() -> bool:
        if ctx.handed_back:  # a stopping worker's hand-back freed it
            return False
        return (
            AsyncJob.objects.filter(lease_free_q(), id=ctx.id, status=JobStatus.IN_PROGRESS)
            .filter(lease_epoch=ctx.job.lease_epoch)  # each claim counts one more: nobody claimed it since ours
            .exists()
        )

    with ctx.release_lock:  # a stopping worker's hand-back releases under it too (`hand_back`)
        return retry_write_once_on_disconnect(
            lambda: lease_release(ctx.id, ctx.lease_token, reason=reason, **fields),
            first_try_landed=freed_by_our_first_try,
        )


def _hand_back_after_disconnect(ctx: JobContext, exc: Exception) -> bool:
    """The database dropped this delivery's connection mid-run, on its retry too (a failover). Release the
    lease on a fresh connection, tried HAND_BACK_TRIES times a second apart, then send a fresh message whether
    the release found the lease ours or not: a release whose answer was lost may have committed, and a
    duplicate message is dropped by the lease. False when the database never answered: the message, not
    acked, comes back after its visibility timeout, as for any unexpected error."""
    reason = f"database unavailable mid-run: {type(exc).__name__}"
    for attempt in range(HAND_BACK_TRIES):
        if attempt:
            time.sleep(1.0)
        connection.close()
        try:
            ctx.handed_back = lease_release(ctx.id, ctx.lease_token, reason=reason)
        except DISCONNECTED:
            continue
        log.warning("delivery handed back: the database dropped it mid-run", extra={"tries": attempt + 1})
        try:
            job_publish(ctx.id, ctx.job.job_type)
        except DISCONNECTED:  # sent, its bookkeeping lost: the message is on the queue all the same
            log.warning("fresh message: its record not written (the sweeper re-sends an unsent one)")
        return True
    return False


def _hand_back(ctx: JobContext, *, reason: str, outcome: Outcome) -> Outcome:
    log.info("delivery handed back", extra={"reason": reason})
    return outcome if hand_back(ctx, reason=reason) else LEASE_LOST


def _hold_back(job: AsyncJob, *, over_budget: bool = False) -> Outcome:
    """The fairness rule held the job back (its organization runs its share while others wait), or the fleet
    runs DRS_MAX_IN_FLIGHT generations (`over_budget`, the outcome says which): send it
    again as a fresh message delayed JOB_FAIR_HOLD_SECONDS and let this one be acknowledged. No attempt is
    spent (nothing was claimed) and the new message starts its own receive count, so waiting never leads
    to RETRIES_EXHAUSTED or the DLQ; the poll still shows IN_PROGRESS. A send that fails leaves the job to
    the sweeper (`job_publish`)."""
    if over_budget:
        log.info("delivery held back: the fleet runs its DRS budget")
    else:
        log.info("delivery held back: its organization runs its share while others wait")
    job_publish(job.id, job.job_type, delay=settings.JOB_FAIR_HOLD_SECONDS)
    return HELD_BACK_BUDGET if over_budget else HELD_BACK


def _requeue_if_unowned(ctx: JobContext) -> Outcome:
    """After a lost lease: when no other delivery holds the job (our lease expired and nobody claimed it, or it
    is still ours), release it and send a fresh message so the job is not left IN_PROGRESS with nothing
    queued."""
    if ctx.handed_back:
        return LEASE_LOST  # its fresh message is already out
    # Ours still (a fence on something besides the lease failed: the grant, JobContext.store_rotated_token) or
    # free: either way no delivery but this one could move the job on.
    unowned = (
        AsyncJob.objects.filter(lease_free_q() | Q(lease_token=ctx.lease_token), id=ctx.id)
        .filter(status=JobStatus.IN_PROGRESS)
        .exists()
    )
    if unowned:
        _release(ctx, reason="lease expired during the delivery")
        states.record(ctx.id, "requeued", actor=ctx.worker, detail="lease expired with nobody holding the job")
        job_publish(ctx.id, ctx.job.job_type)
    return LEASE_LOST


def _exhausted(reason: str) -> JobFailed:
    return JobFailed(codes.RETRIES_EXHAUSTED, reason, retryable=True)


def _fail(job_id: uuid.UUID, lease: uuid.UUID | None, exc: JobFailed, actor: str) -> Outcome:
    """FAILED with the error's code (fenced on `lease` when there is one)."""
    moved = retry_once_on_disconnect(
        job_finish,
        job_id,
        lease_token=lease,
        to=JobStatus.FAILED,
        event="failed",
        actor=actor,
        detail=f"{exc.code}: {exc.message}",
        error=states.error_doc(exc.code, exc.message, retryable=exc.retryable, needs_reauth=exc.needs_reauth),
        keep_credential=exc.retryable,
    )
    if not moved:
        return LEASE_LOST
    log.info("job failed", extra={"code": exc.code})
    return Outcome("failed", exc.code)


def _retry(ctx: JobContext, exc: RetryLater) -> Outcome:
    """Act on the retry decision for a retryable failure: end the job exhausted, or release the lease and
    send a delayed message. Release first, then send: if the send fails, the job is left for the sweeper
    (message_sent_at cleared). A release whose answer was lost with its connection counts as done when the
    lease is free afterwards (`_release`), so the message is still sent."""
    decision = retries.retry_decision(ctx.job.attempts)
    if decision.exhausted:
        return _fail(ctx.id, ctx.lease_token, _exhausted(f"{exc.code}: {exc.message}"), ctx.worker)
    if not _release(ctx, reason=f"retry in {decision.delay_seconds}s: {exc.code}"):
        return LEASE_LOST
    states.record(ctx.id, "retry_scheduled", actor=ctx.worker, detail=f"{exc.code}: {exc.message}")
    log.info(
        "retryable failure; retry scheduled",
        extra={"code": exc.code, "delay": decision.delay_seconds, "attempt": ctx.job.attempts},
    )
    job_publish(ctx.id, ctx.job.job_type, delay=decision.delay_seconds)
    return Outcome("retry", exc.code)


def _throttled(ctx: JobContext, exc: Throttled) -> Outcome:
    """A throttled call: back-pressure, not a failure. In one fenced UPDATE the lease is released, the attempt
    this delivery counted is given back and the run's throttles counted; then the job is sent again after the
    service's Retry-After (bounded, `retries.throttle_decision`), recorded in its history (`throttled`). What
    the handler checkpointed stays done. The JOB_MAX_THROTTLES-th throttle of a run ends it THROTTLED_TOO_LONG
    (re-runnable, its credential retained), so a job throttled for ever still ends; from the
    JOB_THROTTLE_PERSISTENT_AFTER-th on, each is counted in JobsThrottledPersistently (the metric to alarm on)."""
    throttles = ctx.job.throttles + 1
    if throttles >= settings.JOB_THROTTLE_PERSISTENT_AFTER:
        metrics.emit(JobsThrottledPersistently=(1, metrics.COUNT))
    decision = retries.throttle_decision(throttles, exc.retry_after)
    if decision.exhausted:
        message = f"throttled {throttles} times, last {exc.code}: {exc.message}"
        return _fail(ctx.id, ctx.lease_token, JobFailed(codes.THROTTLED_TOO_LONG, message, retryable=True), ctx.worker)
    detail = f"{exc.code}: {exc.message}; sent again in {decision.delay_seconds}s (throttle {throttles})"
    if not _release(ctx, reason=f"throttled: {exc.code}", attempts=F("attempts") - 1, throttles=F("throttles") + 1):
        return LEASE_LOST
    states.record(ctx.id, "throttled", actor=ctx.worker, detail=detail)
    log.info(
        "throttled call; job sent again without spending its attempt",
        extra={"code": exc.code, "delay": decision.delay_seconds, "throttles": throttles},
    )
    job_publish(ctx.id, ctx.job.job_type, delay=decision.delay_seconds)
    return Outcome("held", exc.code)
