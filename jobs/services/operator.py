"""Operator services: every write the admin actions, the runbook commands and the doctor make. Each is a
conditional write (or a decision taken again at the moment of acting), so each is safe to repeat."""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs import runbook_signals, selectors, states
from jobs.display import resend_warning
from jobs.dlq import DlqMessage, DlqScan, queue_counts, total
from jobs.leases import lease_free_q, lease_release_stale
from jobs.models import AsyncJob, JobStatus, LeaseState, default_expires_at
from jobs.selectors import JobFilter
from jobs.services.endings import job_finish
from jobs.services.producer import job_publish
from tokens import services as grants

log = logging.getLogger(__name__)


# --- One job ---------------------------------------------------------------------------------------------


def job_mark_failed(job_id: UUID | str, *, code: str, reason: str, actor: str) -> bool:
    """End an IN_PROGRESS job as FAILED (token invalidated, grant deleted). False if not running."""
    return job_finish(
        job_id,
        to=JobStatus.FAILED,
        event="marked_failed",
        actor=actor,
        detail=f"{code}: {reason}",
        error=states.error_doc(code, reason),
    )


def job_release_stale_lease(job_id: UUID | str, *, actor: str) -> bool:
    """Clear an expired lease on an IN_PROGRESS job (its worker died). Never touches a live lease."""
    return lease_release_stale(job_id, actor=actor)


def job_requeue(job_id: UUID | str, *, actor: str) -> bool:
    """Send a stuck job's message again. Only an IN_PROGRESS job without a live lease; an expired lease
    (its worker died) is cleared first, so the job reads as waiting again. True when sent."""
    job = AsyncJob.objects.filter(id=job_id, status=JobStatus.IN_PROGRESS).first()
    lease = job.lease_state() if job else None
    if job is None or lease == LeaseState.HELD:
        return False
    _unpark(job, actor=actor)
    states.record(job_id, "requeued", actor=actor)
    return job_publish(job.id, job.job_type)


def _unpark(job: AsyncJob, *, actor: str) -> None:
    """Before re-sending `job`: an expired lease is cleared (its worker died), and a parked or crash-looping job,
    which only an operator naming it re-sends, is un-parked with its run of lost deliveries forgotten, so the
    next delivery runs it instead of parking it again."""
    if job.lease_state() == LeaseState.EXPIRED:
        lease_release_stale(job.id, actor=actor)
    if not selectors.deliveries(job).crash_looping_or_parked:
        return
    unparked = AsyncJob.objects.filter(lease_free_q(), id=job.id, status=JobStatus.IN_PROGRESS)
    if unparked.update(parked_at=None, lost_deliveries=0, updated_at=timezone.now()):
        states.record(job.id, "unparked", actor=actor, detail="named by an operator: sent again")


def rerun_refusal(job: AsyncJob) -> str | None:
    """Why `job_rerun` would not put `job` back to work, in one sentence for the operator; None when it would."""
    error = job.error or {}
    if error.get("cancelled"):
        return f"it was cancelled ({job.error_code}: {error.get('message')}): nothing re-runs it"
    if job.status != JobStatus.FAILED or not error.get("retryable"):
        return (
            f"only a FAILED job with a retryable error is re-run (it is {job.status} {job.error_code or ''})".rstrip()
        )
    if not grants.grant_exists(job.id):
        return "it holds no credential (an operator cannot mint one): its user must regenerate it from the UI"
    return None


@dataclass(frozen=True)
class Rerun:
    """What `job_rerun` did: `done`, or why not."""

    done: bool
    why_not: str = ""


def job_rerun(job_id: UUID | str, *, actor: str) -> Rerun:
    """Put a job that failed retryably (RETRIES_EXHAUSTED: an outage outlasted its attempts) back to work
    under the same id, with the credential it retained, resuming from its checkpoints (DRS is not called
    again for a persisted batch). For operators, once the outage is over.

    Only a FAILED job whose error is `retryable` and which still holds its credential: an operator has no
    user's bearer to mint a new one, so a job without one is refused (its user regenerates it from the UI,
    or re-authorises it). A cancelled job (what it worked on is gone: `job_cancel`) is refused saying so. One
    conditional transition, then the message after the commit; safe to repeat.
    """
    job = AsyncJob.objects.filter(id=job_id).first()
    if job is None:
        return Rerun(False, "no such job")
    refusal = rerun_refusal(job)
    if refusal is not None:
        return Rerun(False, refusal)
    now = timezone.now()
    moved = states.transition(
        job_id,
        to=JobStatus.IN_PROGRESS,
        expect=JobStatus.FAILED,
        event="rerun",
        actor=actor,
        detail=f"re-run after {job.error_code}",
        extra_filter={"error_code": job.error_code},
        error=None,
        error_code=None,
        message_sent_at=None,
        attempts=0,
        lost_deliveries=0,
        throttles=0,
        reopen_lock=None,
        reopen_lock_expires_at=None,
        expires_at=default_expires_at(now),
    )
    if not moved:
        return Rerun(False, "the job changed meanwhile")
    if not job_publish(job.id, job.job_type):
        return Rerun(True, "sent later by the sweeper")
    return Rerun(True)


def jobs_sweep_unsent(
    *, grace_seconds: int | None = None, apply: bool = True, actor: str = "sweeper"
) -> list[AsyncJob]:
    """Re-publish jobs whose message was never confirmed sent (a crash between commit and send, or a failed
    re-send). A duplicate is harmless (the lease). Returns the jobs found."""
    jobs = list(selectors.unsent_jobs(grace_seconds=grace_seconds))
    if apply:
        for job in jobs:
            states.record(job.id, "republished", actor=actor, detail="message never confirmed sent")
            job_publish(job.id, job.job_type)
    return jobs


# --- The DLQ ---------------------------------------------------------------------------------------------

RESEND, DROP, KEEP = "resend", "drop", "keep"


@dataclass
class RedriveItem:
    message: DlqMessage
    verdict: str  # resend | drop | keep
    reason: str
    done: bool | None = None  # None in a dry run; otherwise whether the verdict was carried out
    warning: str = ""  # what the operator must know about re-sending it (display.resend_warning)


@dataclass
class Redrive:
    """What one redrive saw and did: an item per selected message, and the messages it left alone."""

    items: list[RedriveItem] = field(default_factory=list)
    not_selected: int = 0  # read, but outside the selection (`not_selected_why` says which option left them)
    not_selected_why: str = ""
    unread: int = 0  # ~in the DLQ but not read: another reader holds them (approximate count)

    @property
    def kept(self) -> int:
        """Selected messages that stay in the DLQ: kept by their verdict, or a verdict that could not be carried
        out (the job changed since it was read, or the send failed)."""
        return sum(item.verdict == KEEP or item.done is False for item in self.items)

    @property
    def left_in_dlq(self) -> int:
        """Messages in the DLQ once the redrive is carried out: kept, not selected, or not read."""
        return self.kept + self.not_selected + self.unread


def redrive_verdict(job: AsyncJob | None, *, named: bool = False, now: datetime | None = None) -> tuple[str, str]:
    """What the redrive does with a DLQ message of `job` (None: the job does not exist). A job whose
    deliveries keep dying, or one a delivery parked, is re-sent only when the operator `named` it (`--job`), once
    its cause is fixed."""
    now = now or timezone.now()
    if job is None:
        return DROP, "job no longer exists"
    if job.status != JobStatus.IN_PROGRESS:
        return DROP, f"job is {job.status}"
    if job.lease_state(now) == LeaseState.HELD:
        return KEEP, f"a worker holds the lease until {job.lease_expires_at:%Y-%m-%dT%H:%M:%SZ}; re-run later"
    deliveries = selectors.deliveries(job, now=now)
    lost = deliveries.lost
    if deliveries.crash_looping_or_parked and not named:
        why = (
            f"its last {lost} deliveries died without an outcome (a crash loop)"
            if deliveries.crash_looping
            else "parked at its message's last receive before the DLQ"
        )
        return KEEP, f"{why}: re-sent only when named with --job {job.id}, once the cause is fixed"
    return RESEND, f"job is IN_PROGRESS with no live lease (attempts {job.attempts}, lost deliveries {lost})"


def job_redrive(job_id: UUID | str, *, actor: str) -> bool:
    """Publish a fresh message for a job whose message died in the DLQ, only when it is IN_PROGRESS with
    no live lease (decided again here, at the moment of sending). True when sent."""
    job = AsyncJob.objects.filter(lease_free_q(), id=job_id, status=JobStatus.IN_PROGRESS).first()
    if job is None:
        return False
    _unpark(job, actor=actor)
    states.record(job.id, "redriven", actor=actor, detail="fresh message for one found in the DLQ")
    return job_publish(job.id, job.job_type)


def dlq_redrive(
    *,
    apply: bool,
    actor: str,
    filters: JobFilter = JobFilter(),
    limit: int = 1000,
    drop_other_tasks: bool = False,
    only_other_tasks: bool = False,
) -> Redrive:
    """Lease-aware redrive of the market-jobs DLQ; run by an operator only, never automatically.

    Per selected message (in the order they were first sent):
    1. Not a job message (a scheduled task's, another task's, or not a Celery message at all): reported by task
       name and kept, or dropped when `drop_other_tasks` or `only_other_tasks` (a scheduled task runs again on
       its own schedule; the line says which it is). Nothing re-sends it.
    2. Job missing or finished: dropped (deleted from the DLQ), reported.
    3. Job IN_PROGRESS under a live lease: kept (a worker owns it; the next run decides).
    4. Job IN_PROGRESS whose deliveries keep dying (a crash loop), or parked: kept, unless named in
       `filters.job_ids`.
    5. Job IN_PROGRESS with no live lease: a fresh message is published (never the old body), then the
       DLQ copy is deleted; further copies for the same job are dropped as duplicates.
    `filters` select job messages; `only_other_tasks` selects the messages that are not job messages, and
    no job message at all. A dry run decides and reports, and leaves every message where it was. Messages
    left alone are counted in the result, with why, and so are those another reader held (not read).
    Each message's verdict is carried out as one step an interrupt does not cut.
    """
    redrive = Redrive()
    counted = total(queue_counts("dlq")["dlq"])  # before the scan: the scan makes the messages in flight
    named = {str(j) for j in filters.job_ids}
    with DlqScan(limit=limit) as scan:
        redrive.unread = max(0, counted - scan.read)
        ids = {m.job_id for m in scan.messages if m.job_id}
        jobs = {str(j.id): j for j in AsyncJob.objects.filter(id__in=ids)}
        resent: set[str] = set()
        for message in scan.messages:
            job = jobs.get(message.job_id) if message.job_id else None
            if only_other_tasks and message.job_id is not None:
                redrive.not_selected += 1
                redrive.not_selected_why = "job messages (--only-other-tasks drops the other messages alone)"
                continue
            if not _matches(message, job, filters):
                redrive.not_selected += 1
                redrive.not_selected_why = "outside --job/--status/--code"
                continue
            if message.job_id is None:
                verdict, reason = (
                    (DROP, _dropped_other_message(message))
                    if drop_other_tasks or only_other_tasks
                    else (KEEP, "not a job message (--only-other-tasks drops such messages alone)")
                )
            else:
                verdict, reason = redrive_verdict(job, named=message.job_id in named)
            if verdict == RESEND and message.job_id in resent:
                verdict, reason = DROP, "duplicate of a message already re-sent in this run"
            if verdict == RESEND:
                resent.add(str(message.job_id))
            warning = ""
            if verdict == RESEND and job is not None:
                warning = resend_warning(job.id, selectors.deliveries(job))
            item = RedriveItem(message, verdict, reason, warning=warning)
            redrive.items.append(item)
            if apply:
                with runbook_signals.deferred():
                    item.done = _carry_out(scan, item, job, actor)
    return redrive


def _dropped_other_message(message: DlqMessage) -> str:
    """Why dropping a message that is not a job message loses nothing, as far as it is true."""
    if message.task is None:
        return "not a Celery message (its body calls no task): nothing could ever run it"
    if message.task in {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}:
        return f"a message of the scheduled task {message.task}, which runs again on its own schedule"
    return f"a message of the task {message.task}, which nothing schedules here: it does not run again"


def _matches(message: DlqMessage, job: AsyncJob | None, filters: JobFilter) -> bool:
    if filters.job_ids and message.job_id not in {str(j) for j in filters.job_ids}:
        return False
    if filters.status and (job is None or job.status != filters.status):
        return False
    return not (filters.code and (job is None or job.error_code != filters.code))


def _carry_out(scan: DlqScan, item: RedriveItem, job: AsyncJob | None, actor: str) -> bool:
    if item.verdict == KEEP:
        return True
    if item.verdict == RESEND:
        if job is None or not job_redrive(job.id, actor=actor):
            return False  # its state changed since the scan, or the send failed: the DLQ copy stays
        scan.delete(item.message)
        return True
    return dlq_drop(scan, item.message, job=job, actor=actor, reason=item.reason)


def dlq_drop(scan: DlqScan, message: DlqMessage, *, job: AsyncJob | None, actor: str, reason: str) -> bool:
    """Delete a DLQ message that must never run again (its job is finished or gone), noting it in the
    job's history when the job still exists."""
    scan.delete(message)
    if job is not None:
        states.record(job.id, "dlq_message_dropped", actor=actor, detail=reason)
    return True


# --- Expired records ---------------------------------------------------------------------------------


def job_purge(job_id: UUID | str, *, now: datetime | None = None) -> bool:
    """Delete one expired, finished job record (its history goes with it) and its grant in one transaction,
    then invalidate its token at IMS (best effort, after commit: a network call must not hold the row lock).
    A job still IN_PROGRESS is never purged: a worker or a delayed retry may be on it; an operator finishes
    it first (job_mark_failed). True when deleted."""
    now = now or timezone.now()
    with transaction.atomic():
        job = (
            AsyncJob.objects.select_for_update()
            .filter(id=job_id, expires_at__lte=now)
            .exclude(status=JobStatus.IN_PROGRESS)
            .first()
        )
        if job is None:
            return False
        taken = grants.grant_take(job_id)
        job.delete()
    taken.invalidate()
    return True


def grant_purge_orphan(job_id: UUID | str) -> bool:
    """End a grant whose job no longer exists (token invalidated, grant deleted). False if the job exists."""
    if AsyncJob.objects.filter(id=job_id).exists():
        return False
    with transaction.atomic():
        taken = grants.grant_take(job_id)
    taken.invalidate()
    return True


@dataclass(frozen=True)
class PurgeItem:
    """One record the purge looked at: a job past its expiry, a grant whose job is gone, or the heartbeat row of
    a worker silent past the retention window."""

    subject: object  # a job id, or a worker's `host:pid`
    kind: str  # "job" | "orphaned grant" | "worker heartbeat"
    detail: str
    done: bool | None  # None in a dry run


def jobs_purge_expired(
    *, apply: bool, expired_for: timedelta = timedelta(0), filters: JobFilter = JobFilter(), now: datetime | None = None
) -> list[PurgeItem]:
    """The one purge loop (beat's daily task and `job_purge_expired`): every job record past its expiry by
    `expired_for`, then, when unfiltered, every grant whose job no longer exists and every worker heartbeat row
    silent for longer than WORKER_HEARTBEAT_RETENTION_SECONDS (a dead worker's: the overview lists it as dead
    until then). Dry run unless `apply`."""
    now = now or timezone.now()
    items = []
    for job in selectors.jobs_expired(expired_for=expired_for, filters=filters, now=now):
        done = job_purge(job.id, now=now) if apply else None
        items.append(PurgeItem(job.id, "job", f"{job.status}, expired {job.expires_at:%Y-%m-%dT%H:%M:%SZ}", done))
    if not filters.narrows:
        for grant in selectors.grants_orphaned():
            done = grant_purge_orphan(grant.job_id) if apply else None
            items.append(PurgeItem(grant.job_id, "orphaned grant", f"pair {grant.pair}, no job row", done))
        for row in selectors.heartbeats_silent(now=now):
            done = heartbeat_forget_silent(row.worker, now=now) if apply else None
            items.append(
                PurgeItem(row.worker, "worker heartbeat", f"silent since {row.beat_at:%Y-%m-%dT%H:%M:%SZ}", done)
            )
    return items


def heartbeat_forget_silent(worker: str, *, now: datetime | None = None) -> bool:
    """Delete `worker`'s heartbeat row if it is still silent past the retention window (it may have come back
    since it was listed); True when deleted."""
    deleted, _ = selectors.heartbeats_silent(now=now).filter(worker=worker).delete()
    return deleted > 0
