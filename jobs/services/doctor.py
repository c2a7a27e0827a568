"""The doctor: reconcile jobs with the market-jobs queue and its DLQ, classify every inconsistency, and name
(and with `apply`, take) the safe action the runbook commands would take.

What it reads, and why that way:

- The job table, every IN_PROGRESS job, and the jobs named by DLQ messages.
- The DLQ, by receiving with a short hold and releasing every message it does not delete (a receive is
  the only way to read an SQS message; the DLQ has no redrive policy, so this moves nothing).
- The main queue, by its approximate counts only: a receive there counts towards maxReceiveCount and
  would push live work into the DLQ. Whether a waiting job still has a message is therefore judged from
  its row: never sent past the enqueue grace period, or nothing at all for longer than the stuck
  threshold (a message delayed for a retry waits at most 15 minutes).
- External services (Semrush) are not compared: the doctor has no credential of its own (a job's promise
  token may be exchanged only by the worker holding its lease, and exchanging rotates it). How far a job
  got comes from its handler's reading of its checkpoints (`handlers.progress_of`), which the handler sets
  only after each step succeeded.

A job whose lease is live is running and is left alone; if its worker hangs, the lease expires and the
next run finds it. The DLQ is never redriven here: a waiting job whose message is in the DLQ is reported
for an operator to redrive with `job_redrive_dlq`.
"""
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs import handlers, selectors
from jobs.clients import sqs
from jobs.display import ago, checkpoints_line
from jobs.dlq import DlqScan, queue_counts
from jobs.handlers import Progress
from jobs.models import AsyncJob, JobStatus
from jobs.services import operator

WAITING_WITHOUT_MESSAGE = "waiting_without_message"
DLQ_MESSAGE_FOR_FINISHED_JOB = "dlq_message_for_finished_job"
DLQ_MESSAGE_FOR_WAITING_JOB = "dlq_message_for_waiting_job"
LEASE_EXPIRED = "lease_expired"
WRITE_STALLED = "write_stalled"
WRITTEN_NOT_COMPLETED = "written_not_completed"

EXTERNAL_NOTE = ("Semrush not compared: the doctor holds no credential of its own; how far each job got is read "
                 "from its checkpoints")


@dataclass
class Finding:
    kind: str
    subject: str  # a job id, or `message <id>` when no job can be named
    detail: str
    action: str  # what --apply does, or why it does nothing
    fix: Callable[[], bool] | None = field(default=None, repr=False)
    done: bool | None = None  # None until applied


@dataclass
class Diagnosis:
    findings: list[Finding]
    notes: list[str]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out


def doctor_run(*, apply: bool, actor: str, stuck_after: timedelta | None = None, now=None) -> Diagnosis:
    """Diagnose, and with `apply` take each finding's safe action. Safe to run twice: every action is a
    conditional service call, and a job just acted on is not quiet again until a threshold passes.
    Raises jobs.clients.sqs.AWSError when the DLQ cannot be read."""
    with DlqScan() as scan:
        diagnosis = diagnose(scan, actor=actor, stuck_after=stuck_after, now=now)
        if apply:
            for finding in diagnosis.findings:
                if finding.fix is not None:
                    finding.done = bool(finding.fix())
    return diagnosis


def diagnose(scan: DlqScan, *, actor: str, stuck_after: timedelta | None = None, now=None) -> Diagnosis:
    now = now or timezone.now()
    stuck_after = stuck_after or timedelta(seconds=settings.JOB_STUCK_AFTER_SECONDS)
    budget = timedelta(seconds=settings.SEMRUSH_WRITE_BUDGET_SECONDS)
    grace = timedelta(seconds=settings.JOB_ENQUEUE_GRACE_SECONDS)
    in_dlq = scan.by_job()
    findings: list[Finding] = []

    def requeue(job):
        return lambda: operator.job_requeue(job.id, actor=actor)

    waiting = selectors.with_activity(AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS)).order_by("created_at")
    for job in waiting:
        lease = job.lease_state(now)
        quiet = now - job.last_activity_at
        quiet_text = f"no activity for {ago(job.last_activity_at, now).removesuffix(' ago')}"
        subject = str(job.id)
        if lease == "held":
            continue
        if lease == "expired":
            findings.append(Finding(
                LEASE_EXPIRED, subject,
                f"lease expired {ago(job.lease_expires_at, now)}, phase {job.phase}, attempts {job.attempts}",
                "re-enqueue (job_requeue_stuck): its worker died; a claim takes an expired lease over",
                requeue(job)))
        elif subject in in_dlq:
            findings.append(Finding(
                DLQ_MESSAGE_FOR_WAITING_JOB, subject,
                f"IN_PROGRESS, no lease, its message is in the DLQ (phase {job.phase}, attempts {job.attempts})",
                f"none automatic: the DLQ is never redriven by itself; review, then "
                f"job_redrive_dlq --job {subject} --apply"))
        elif handlers.progress_of(job) is Progress.EFFECTS_WRITTEN and quiet > budget:
            findings.append(Finding(
                WRITTEN_NOT_COMPLETED, subject,
                f"{handlers.describe(job) or job.job_type}: external writes done "
                f"({checkpoints_line(job.checkpoints)}) but the job is not COMPLETED; {quiet_text}",
                "re-enqueue; the worker resumes at its last step (job_requeue_stuck)", requeue(job)))
        elif handlers.progress_of(job) is Progress.INPUT_PERSISTED and quiet > budget:
            findings.append(Finding(
                WRITE_STALLED, subject,
                f"{handlers.describe(job) or job.job_type}: input persisted ({checkpoints_line(job.checkpoints)}), "
                f"nothing written; {quiet_text} (write budget {settings.SEMRUSH_WRITE_BUDGET_SECONDS}s)",
                "re-enqueue; the worker writes from the persisted input, which is not produced again "
                "(job_requeue_stuck)", requeue(job)))
        elif (job.message_sent_at is None and quiet > grace) or quiet > stuck_after:
            why = "its message was never sent" if job.message_sent_at is None else (
                f"last message sent {ago(job.message_sent_at, now)}")
            findings.append(Finding(
                WAITING_WITHOUT_MESSAGE, subject,
                f"IN_PROGRESS, no lease, not in the DLQ, {why}; {quiet_text}",
                "re-enqueue a fresh message (job_requeue_stuck)", requeue(job)))

    dlq_jobs = {str(j.id): j for j in AsyncJob.objects.filter(id__in=list(in_dlq))}
    for job_id, messages in in_dlq.items():
        job = dlq_jobs.get(job_id)
        if job is not None and job.status == JobStatus.IN_PROGRESS:
            continue  # judged with the waiting jobs above
        reason = f"job is {job.status}" if job else "job no longer exists"
        for message in messages:
            findings.append(Finding(
                DLQ_MESSAGE_FOR_FINISHED_JOB, job_id,
                f"DLQ message {message.message_id}; {reason}",
                "drop the DLQ message (job_redrive_dlq drops it too)",
                lambda m=message, j=job, r=reason: operator.dlq_drop(scan, m, job=j, actor=actor, reason=r)))

    notes = [_queue_note(scan), EXTERNAL_NOTE]
    unreadable = sum(1 for m in scan.messages if m.job_id is None)
    if unreadable:
        notes.append(f"{unreadable} DLQ message(s) are not job messages; left in place")
    return Diagnosis(findings=findings, notes=notes)


def _queue_note(scan: DlqScan) -> str:
    try:
        q = queue_counts()["queue"]
    except sqs.AWSError as exc:
        return f"main queue counts unavailable ({type(exc).__name__})"
    return (f"main queue ~{q.get('Visible', 0)} waiting, {q.get('NotVisible', 0)} in flight, "
            f"{q.get('Delayed', 0)} delayed (counted, never received); DLQ {len(scan.messages)} message(s) read")
