"""The doctor: reconcile jobs with the market-jobs queue and its DLQ, classify every inconsistency, and name
(and with `apply`, take) the safe action the runbook commands would take.

What it reads, and why that way:

- The queues' approximate counts first (waiting, in flight, delayed; nothing is received from the main
  queue: a receive there counts towards maxReceiveCount and would push live work into the DLQ).
- The DLQ, by receiving with a short hold and releasing every message it does not delete (a receive is
  the only way to read an SQS message; the DLQ has no redrive policy, so this moves nothing). Fewer
  messages read than the DLQ holds means another reader holds some: that is a finding, never "clean".
- The job table: every IN_PROGRESS job, and the jobs named by DLQ messages. Whether a waiting job still has
  a message is judged from its row: never sent past the enqueue grace period, or nothing at all for longer
  than the stuck threshold (a message delayed for a retry waits at most 15 minutes).
- External services (Semrush) are not compared: the doctor has no credential of its own (a job's promise
  token may be exchanged only by the worker holding its lease, and exchanging rotates it). How far a job got
  comes from its handler's reading of its checkpoints (`handlers.progress_of`).

The order of the questions asked about a job matters: DLQ membership first, so a job whose message died in
the DLQ is never re-sent here, whatever its lease says (only `job_redrive_dlq` sends for those); then a live
lease (left alone, unless its worker shows no sign of life); then the rest.
"""
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs import handlers, selectors
from jobs.display import ago, checkpoints_line, stamp
from jobs.dlq import DlqScan, queue_counts
from jobs.handlers import Progress
from jobs.models import AsyncJob, JobStatus
from jobs.services import operator

WAITING_WITHOUT_MESSAGE = "waiting_without_message"
DLQ_MESSAGE_FOR_FINISHED_JOB = "dlq_message_for_finished_job"
DLQ_MESSAGE_FOR_WAITING_JOB = "dlq_message_for_waiting_job"
DLQ_COPY_OF_RUNNING_JOB = "dlq_copy_of_running_job"
DLQ_MESSAGE_NOT_A_JOB = "dlq_message_not_a_job"
DLQ_READ_INCOMPLETE = "dlq_read_incomplete"
LEASE_EXPIRED = "lease_expired"
WORKER_PRESUMED_DEAD = "worker_presumed_dead"
NO_CONSUMER = "no_consumer"
WRITE_STALLED = "write_stalled"
WRITTEN_NOT_COMPLETED = "written_not_completed"

EXTERNAL_NOTE = ("Semrush not compared: the doctor holds no credential of its own; how far each job got is read "
                 "from its checkpoints")
# Messages waiting and none in flight while a job's message has been out this long: nothing consumes.
NO_CONSUMER_AFTER = timedelta(seconds=120)
REDRIVE = "job_redrive_dlq --job {job} --apply"


@dataclass
class Finding:
    kind: str
    subject: str  # a job id, `message <id> (<task>)`, or `queue`
    detail: str
    action: str  # what --apply does, or what an operator does
    fix: Callable[[], bool] | None = field(default=None, repr=False)
    done: bool | None = None  # None until applied


@dataclass
class Diagnosis:
    findings: list[Finding]
    notes: list[str]

    def counts(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.findings))

    @property
    def needs_an_operator(self) -> bool:
        """True while a finding has no automatic fix, or its fix was not (or not yet) carried out."""
        return any(f.fix is None or not f.done for f in self.findings)


def doctor_run(*, apply: bool, actor: str, stuck_after: timedelta | None = None, now=None) -> Diagnosis:
    """Diagnose, and with `apply` take each finding's safe action. Safe to run twice: every action is a
    conditional service call, and a job just acted on is not quiet again until a threshold passes.
    Raises jobs.clients.sqs.AWSError when a queue cannot be read."""
    counts = queue_counts()  # before the scan: the scan itself makes the DLQ's messages in flight
    with DlqScan() as scan:
        diagnosis = diagnose(scan, counts, actor=actor, stuck_after=stuck_after, now=now)
        if apply:
            for finding in diagnosis.findings:
                if finding.fix is not None:
                    finding.done = bool(finding.fix())
    return diagnosis


def diagnose(scan: DlqScan, counts: dict, *, actor: str, stuck_after: timedelta | None = None,
             now=None) -> Diagnosis:
    now = now or timezone.now()
    stuck_after = stuck_after or timedelta(seconds=settings.JOB_STUCK_AFTER_SECONDS)
    in_dlq = scan.by_job()
    findings = [*_waiting_jobs(in_dlq, actor=actor, stuck_after=stuck_after, now=now),
                *_dlq_messages(scan, in_dlq, actor=actor),
                *_queue_findings(scan, counts, now=now)]
    return Diagnosis(findings=findings, notes=[_queue_note(scan, counts), EXTERNAL_NOTE])


def _waiting_jobs(in_dlq: dict, *, actor: str, stuck_after: timedelta, now) -> list[Finding]:
    budget = timedelta(seconds=settings.SEMRUSH_WRITE_BUDGET_SECONDS)
    grace = timedelta(seconds=settings.JOB_ENQUEUE_GRACE_SECONDS)
    silent = timedelta(seconds=selectors.SILENT_HEARTBEATS * settings.JOB_HEARTBEAT_SECONDS)
    findings = []

    def requeue(job):
        return lambda: operator.job_requeue(job.id, actor=actor)

    running = selectors.with_activity(AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS)).order_by("created_at")
    for job in running:
        lease = job.lease_state(now)
        quiet = now - job.last_activity_at
        quiet_text = f"no activity for {ago(job.last_activity_at, now).removesuffix(' ago')}"
        subject = str(job.id)
        if subject in in_dlq:
            if lease == "held":
                findings.append(Finding(
                    DLQ_COPY_OF_RUNNING_JOB, subject,
                    f"a worker holds its lease until {stamp(job.lease_expires_at)}, and a copy of its message is "
                    f"in the DLQ (phase {job.phase}, attempts {job.attempts})",
                    "none automatic: let it run; once it has finished, job_redrive_dlq drops the copy; if its lease "
                    f"runs out instead, review, then {REDRIVE.format(job=subject)}"))
            else:
                findings.append(Finding(
                    DLQ_MESSAGE_FOR_WAITING_JOB, subject,
                    f"IN_PROGRESS, lease {lease}, its message is in the DLQ (phase {job.phase}, attempts "
                    f"{job.attempts}; it kept failing: read the worker logs for it)",
                    f"none automatic: the DLQ is never redriven by itself; review, then "
                    f"{REDRIVE.format(job=subject)}"))
        elif lease == "held":
            if quiet > silent:
                findings.append(Finding(
                    WORKER_PRESUMED_DEAD, subject,
                    f"a lease is held until {stamp(job.lease_expires_at)} but {quiet_text} (a running worker "
                    f"shows activity every {settings.JOB_HEARTBEAT_SECONDS}s); phase {job.phase}",
                    f"none automatic: a lease cannot be taken safely before it expires; after "
                    f"{stamp(job.lease_expires_at)} doctor --apply re-enqueues it; to stop it now: job_mark_failed"))
        elif lease == "expired":
            findings.append(Finding(
                LEASE_EXPIRED, subject,
                f"lease expired {ago(job.lease_expires_at, now)}, phase {job.phase}, attempts {job.attempts}",
                "re-enqueue (job_requeue_stuck): its worker died; a claim takes an expired lease over",
                requeue(job)))
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
    return findings


def _dlq_messages(scan: DlqScan, in_dlq: dict, *, actor: str) -> list[Finding]:
    findings = []
    jobs = {str(j.id): j for j in AsyncJob.objects.filter(id__in=list(in_dlq))}
    for job_id, messages in in_dlq.items():
        job = jobs.get(job_id)
        if job is not None and job.status == JobStatus.IN_PROGRESS:
            continue  # judged with the running jobs above
        reason = f"job is {job.status}" if job else "job no longer exists"
        for message in messages:
            findings.append(Finding(
                DLQ_MESSAGE_FOR_FINISHED_JOB, job_id, f"DLQ message {message.message_id}; {reason}",
                "drop the DLQ message (job_redrive_dlq drops it too)",
                lambda m=message, j=job, r=reason: operator.dlq_drop(scan, m, job=j, actor=actor, reason=r)))
    for message in scan.messages:
        if message.job_id is None:
            findings.append(Finding(
                DLQ_MESSAGE_NOT_A_JOB, message.label,
                f"not a job message; sent {stamp(message.sent_at)}",
                "none automatic: review, then job_redrive_dlq --drop-other-tasks --apply deletes such messages"))
    return findings


def _queue_findings(scan: DlqScan, counts: dict, *, now) -> list[Finding]:
    findings = []
    dlq = counts["dlq"]
    in_dlq = dlq.get("Visible", 0) + dlq.get("NotVisible", 0)
    if len(scan.messages) < in_dlq:
        findings.append(Finding(
            DLQ_READ_INCOMPLETE, "dlq",
            f"read {len(scan.messages)} of ~{in_dlq} DLQ message(s): {dlq.get('NotVisible', 0)} were held by another "
            "reader (a doctor, a redrive, job_inspect) and could not be judged",
            "none automatic: run the doctor again in a minute"))
    queue = counts["queue"]
    waiting = queue.get("Visible", 0)
    if waiting and not queue.get("NotVisible", 0):
        oldest = (AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS, lease_token__isnull=True,
                                          message_sent_at__lte=now - NO_CONSUMER_AFTER)
                  .order_by("message_sent_at").values_list("message_sent_at", flat=True).first())
        if oldest is not None:
            findings.append(Finding(
                NO_CONSUMER, "queue",
                f"~{waiting} message(s) waiting, none in flight; the oldest waiting job's message went out "
                f"{ago(oldest, now)} (over {int(NO_CONSUMER_AFTER.total_seconds())}s): no worker is consuming",
                "none automatic: start or fix the workers (`manage.py worker_readiness` on a worker says what "
                "it cannot reach)"))
    return findings


def _queue_note(scan: DlqScan, counts: dict) -> str:
    q, d = counts["queue"], counts["dlq"]
    return (f"main queue ~{q.get('Visible', 0)} waiting, {q.get('NotVisible', 0)} in flight, "
            f"{q.get('Delayed', 0)} delayed (counted, never received); DLQ ~{d.get('Visible', 0)} waiting, "
            f"{d.get('NotVisible', 0)} in flight, {len(scan.messages)} read")

