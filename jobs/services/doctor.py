"""The doctor: reconcile jobs with the market-jobs queue, its DLQ, the maintenance queue and the workers'
heartbeats, classify every inconsistency, and name (and with `apply`, take) the safe action the runbook commands
would take.

What it reads, and why that way:

- The queues' approximate counts first (waiting, in flight, delayed; nothing is received from the main
  queue: a receive there counts towards maxReceiveCount and would push live work into the DLQ).
- The worker heartbeats (jobs/worker/heartbeats.py): whether anything consumes a queue is decided from them and
  from the queue, never from job leases, which a killed worker leaves behind looking like a live one's.
- The DLQ, by receiving with a short hold and releasing every message it does not delete (a receive is
  the only way to read an SQS message; the DLQ has no redrive policy, so this moves nothing). Fewer
  messages read than the DLQ holds means another reader holds some: that is a finding, never "clean".
- The job table: every IN_PROGRESS job, and the jobs named by DLQ messages. Whether a waiting job still has
  a message is judged from its row: never sent past the enqueue grace period, or nothing at all for longer
  than the stuck threshold (a message delayed for a retry waits at most JOB_RETRY_MAX_SECONDS, and never more
  than SQS's limit, `retries.SQS_MAX_DELAY_SECONDS`).
- External services (Semrush) are not compared: the doctor has no credential of its own (a job's promise
  token may be exchanged only by the worker holding its lease, and exchanging rotates it). How far a job got
  comes from its handler's reading of its checkpoints (`handlers.progress_of`).

The order of the questions asked about a job matters (docs/operations.md has the table of cases): DLQ
membership first, so a job whose message died in the DLQ is never re-sent here, whatever its lease says
(only `job_redrive_dlq` sends for those); then a live lease (left alone, unless its worker shows no sign of
life); then the job's own record of deliveries that died without an outcome, so a crash-looping job is never
re-sent here either, wherever its message happens to be; then the rest. While no worker is alive nothing is
re-sent that may still have a message somewhere: it would only pile up copies for nobody.
"""

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Case, CharField, Value, When
from django.utils import timezone
from django_stubs_ext import WithAnnotations

from jobs import display, handlers, selectors
from jobs.display import ago, checkpoints_line, stamp
from jobs.dlq import DlqMessage, DlqScan, QueueCounts, queue_counts, total
from jobs.handlers import Progress
from jobs.models import AsyncJob, JobStatus, LeaseState, WorkerHeartbeat
from jobs.services import operator

WAITING_WITHOUT_MESSAGE = "waiting_without_message"
DLQ_MESSAGE_FOR_FINISHED_JOB = "dlq_message_for_finished_job"
DLQ_MESSAGE_FOR_WAITING_JOB = "dlq_message_for_waiting_job"
DLQ_COPY_OF_RUNNING_JOB = "dlq_copy_of_running_job"
DLQ_MESSAGE_NOT_A_JOB = "dlq_message_not_a_job"
DLQ_READ_INCOMPLETE = "dlq_read_incomplete"
LEASE_EXPIRED = "lease_expired"
WORKER_PRESUMED_DEAD = "worker_presumed_dead"
CRASH_LOOP = "crash_loop"
NO_CONSUMER = "no_consumer"
WRITE_STALLED = "write_stalled"
WRITTEN_NOT_COMPLETED = "written_not_completed"
NOT_ENQUEUED = "not_enqueued"
# What a job waits for when it waits rather than stalls (no finding; the doctor's note counts them).
WAITING_BUDGET = "a DRS budget place"
WAITING_DELAY = "a delay (throttle or retry)"

EXTERNAL_NOTE = (
    "Semrush not compared: the doctor holds no credential of its own; how far each job got is read from its checkpoints"
)
REDRIVE = "job_redrive_dlq --job {job} --apply"
DROP_OTHER_TASKS = "job_redrive_dlq --only-other-tasks --apply"
HELD_BACK = (
    "held back: no worker is alive to take it (see no_consumer), and a copy may still be queued; once one "
    "runs, doctor --apply re-enqueues it"
)


@dataclass
class Finding:
    kind: str
    subject: str  # a job id, `message <id> (<task>)`, `dlq`, or a queue's name
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


@dataclass(frozen=True)
class Consumers:
    """Who consumes a queue, from the workers' heartbeats."""

    key: str  # `queue` (market jobs) or `maintenance`, as in queue_counts()
    queue: str
    alive: int
    last_seen: WorkerHeartbeat | None


def doctor_run(
    *, apply: bool, actor: str, stuck_after: timedelta | None = None, now: datetime | None = None
) -> Diagnosis:
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


def consumers(*, now: datetime | None = None) -> list[Consumers]:
    """The market-jobs queue's and the maintenance queue's live consumers."""
    return [
        Consumers(key, name, selectors.workers_alive(name, now=now), selectors.worker_last_seen(name))
        for key, name in (("queue", settings.MARKET_JOBS_QUEUE), ("maintenance", settings.MAINTENANCE_QUEUE))
    ]


def diagnose(
    scan: DlqScan, counts: QueueCounts, *, actor: str, stuck_after: timedelta | None = None, now: datetime | None = None
) -> Diagnosis:
    now = now or timezone.now()
    stuck_after = stuck_after or timedelta(seconds=settings.JOB_STUCK_AFTER_SECONDS)
    in_dlq = scan.by_job()
    fleet = consumers(now=now)
    running = list(
        selectors.with_activity(AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS))
        .annotate(
            waiting_for=Case(
                When(selectors.delay_wait_q(now=now), then=Value(WAITING_DELAY)),
                When(selectors.budget_wait_q(now=now), then=Value(WAITING_BUDGET)),
                default=Value(""),
                output_field=CharField(),
            )
        )
        .order_by("created_at")
    )
    # A job waiting for a budget place has its message on the queue (unreceived, or held back and delayed): with
    # nothing at all on the queue, what waits there has no message, and is stalled.
    queued = bool(total(counts["queue"]))
    waits: Counter[str] = Counter()
    findings = [
        *_consumer_findings(fleet, counts, running=len(running), now=now),
        *_running_jobs(
            running,
            in_dlq,
            workers=fleet[0].alive > 0,
            actor=actor,
            stuck_after=stuck_after,
            now=now,
            queued=queued,
            waits=waits,
        ),
        *_dlq_messages(scan, in_dlq, actor=actor),
        *_dlq_read(scan, counts),
        *(Finding(NOT_ENQUEUED, item.subject, item.detail, item.action) for item in handlers.stranded()),
    ]
    notes = [_queue_note(scan, counts), _budget_note(running, waits, now), _workers_note(fleet, now), EXTERNAL_NOTE]
    return Diagnosis(findings=findings, notes=notes)


def _consumer_findings(fleet: list[Consumers], counts: QueueCounts, *, running: int, now: datetime) -> list[Finding]:
    """A queue no live worker consumes: reported whatever it holds right now (new work has nowhere to go)."""
    findings = []
    for consumer in fleet:
        if consumer.alive:
            continue
        queue = counts[consumer.key]
        holds = (
            f"~{queue.get('Visible', 0)} waiting, {queue.get('NotVisible', 0)} in flight, "
            f"{queue.get('Delayed', 0)} delayed"
        )
        if consumer.key == "queue":
            holds += f"; {running} job(s) IN_PROGRESS"
        seen = consumer.last_seen
        last = (
            f"last heartbeat {ago(seen.beat_at, now)} from {seen.worker}" if seen else "no worker heartbeat on record"
        )
        findings.append(
            Finding(
                NO_CONSUMER,
                consumer.queue,
                f"no live worker consumes it ({last}; a worker beats every {settings.WORKER_HEARTBEAT_SECONDS}s); "
                f"it holds {holds}",
                "none automatic: start or fix the workers (`manage.py worker_readiness` on a worker says what it "
                "cannot reach); while none runs, nothing that may still be queued is re-sent",
            )
        )
    return findings


def _running_jobs(
    running: Sequence["WithAnnotations[AsyncJob, selectors.Activity]"],
    in_dlq: dict[str, list[DlqMessage]],
    *,
    workers: bool,
    actor: str,
    stuck_after: timedelta,
    now: datetime,
    queued: bool = True,
    waits: Counter[str] | None = None,
) -> list[Finding]:
    """One finding per IN_PROGRESS job that needs one: the first of the table that applies. A job waiting for a place
    in the DRS budget (its message on the queue) or out a delay (a throttle's Retry-After, a retry's backoff) is
    waiting, not stalled: no finding, counted in `waits` for the note."""
    waits = Counter() if waits is None else waits
    budget = timedelta(seconds=settings.SEMRUSH_WRITE_BUDGET_SECONDS)
    grace = timedelta(seconds=settings.JOB_ENQUEUE_GRACE_SECONDS)
    silent = timedelta(seconds=selectors.SILENT_HEARTBEATS * settings.JOB_HEARTBEAT_SECONDS)
    findings = []

    def requeue(job: AsyncJob, *, may_be_queued: bool = True) -> tuple[Callable[[], bool] | None, str]:
        """The re-enqueue fix, unless no worker is alive and a copy of the job's message may still be queued."""
        if may_be_queued and not workers:
            return None, HELD_BACK
        return (lambda: operator.job_requeue(job.id, actor=actor)), ""

    for job in running:
        lease = job.lease_state(now)
        quiet = now - job.last_activity_at
        quiet_text = f"no activity for {ago(job.last_activity_at, now).removesuffix(' ago')}"
        deliveries = selectors.deliveries(job, now=now)
        lost = deliveries.lost
        subject = str(job.id)
        if subject in in_dlq:
            if lease == LeaseState.HELD:
                dead = f"; {quiet_text}: its worker is presumed dead" if quiet > silent else ""
                findings.append(
                    Finding(
                        DLQ_COPY_OF_RUNNING_JOB,
                        subject,
                        f"a worker holds its lease until {stamp(job.lease_expires_at)}, and a copy of its message is "
                        f"in the DLQ (phase {job.phase}, attempts {job.attempts}){dead}",
                        "none automatic: let it run; once it has finished, job_redrive_dlq drops the copy; if its "
                        f"lease runs out instead, review, then {REDRIVE.format(job=subject)}",
                    )
                )
            else:
                received = max(m.receive_count for m in in_dlq[subject])
                warning = display.resend_warning(subject, deliveries)
                findings.append(
                    Finding(
                        DLQ_MESSAGE_FOR_WAITING_JOB,
                        subject,
                        f"IN_PROGRESS, lease {lease}, its message is in the DLQ (phase {job.phase}, attempts "
                        f"{deliveries.attempts}, lost deliveries {lost}; {_why_dead_lettered(deliveries, received)})",
                        f"none automatic: the DLQ is never redriven by itself; review, then "
                        f"{REDRIVE.format(job=subject)}" + (f" ({warning})" if warning else ""),
                    )
                )
        elif lease == LeaseState.HELD:
            if quiet > silent:
                findings.append(
                    Finding(
                        WORKER_PRESUMED_DEAD,
                        subject,
                        f"a lease is held until {stamp(job.lease_expires_at)} but {quiet_text} (a running worker "
                        f"shows activity every {settings.JOB_HEARTBEAT_SECONDS}s); phase {job.phase}",
                        f"none automatic: a lease cannot be taken safely before it expires; after "
                        f"{stamp(job.lease_expires_at)} doctor --apply re-enqueues it; to stop it now: job_mark_failed",
                    )
                )
        elif deliveries.crash_looping_or_parked:
            warning = display.resend_warning(subject, deliveries)
            parked = (
                f"parked {ago(job.parked_at, now)}: no worker runs it, its message is deleted"
                if job.parked_at is not None
                else "the next worker to receive its message parks it instead of running it"
            )
            why = (
                f"its last {lost} deliveries died without an outcome (attempts {deliveries.attempts}, phase "
                f"{job.phase}): what it does may be what kills its workers"
                if deliveries.crash_looping
                else f"its message reached its last receive before the DLQ (attempts {deliveries.attempts}, phase "
                f"{job.phase})"
            )
            findings.append(
                Finding(
                    CRASH_LOOP,
                    subject,
                    f"IN_PROGRESS, lease {lease}, {why}; {parked}",
                    f"none automatic: it is never re-sent by itself; read the worker logs for it (job_inspect --job "
                    f"{subject}), then stop it (job_mark_failed --job {subject} --reason … --apply) or, once the "
                    f"cause is fixed, re-send it (job_requeue_stuck --job {subject} --older-than 0s --apply)"
                    + (f"; {warning}" if warning else ""),
                )
            )
        elif lease == LeaseState.EXPIRED:
            fix, held = requeue(job)
            findings.append(
                Finding(
                    LEASE_EXPIRED,
                    subject,
                    f"lease expired {ago(job.lease_expires_at, now)}, phase {job.phase}, attempts {job.attempts}",
                    held or "re-enqueue (job_requeue_stuck): its worker died; a claim takes an expired lease over",
                    fix,
                )
            )
        elif (waiting := getattr(job, "waiting_for", "")) and (waiting == WAITING_DELAY or queued):
            waits[waiting] += 1
        elif handlers.progress_of(job) is Progress.EFFECTS_WRITTEN and quiet > budget:
            fix, held = requeue(job)
            findings.append(
                Finding(
                    WRITTEN_NOT_COMPLETED,
                    subject,
                    f"{handlers.describe(job) or job.job_type}: external writes done "
                    f"({checkpoints_line(job.checkpoints)}) but the job is not COMPLETED; {quiet_text}",
                    held or "re-enqueue; the worker resumes at its last step (job_requeue_stuck)",
                    fix,
                )
            )
        elif handlers.progress_of(job) is Progress.INPUT_PERSISTED and quiet > budget:
            fix, held = requeue(job)
            findings.append(
                Finding(
                    WRITE_STALLED,
                    subject,
                    f"{handlers.describe(job) or job.job_type}: input persisted ({checkpoints_line(job.checkpoints)}), "
                    f"nothing written; {quiet_text} (write budget {settings.SEMRUSH_WRITE_BUDGET_SECONDS}s)",
                    held
                    or "re-enqueue; the worker writes from the persisted input, which is not produced again "
                    "(job_requeue_stuck)",
                    fix,
                )
            )
        elif (never_sent := job.message_sent_at is None and quiet > grace) or quiet > stuck_after:
            why = "its message was never sent" if never_sent else f"last message sent {ago(job.message_sent_at, now)}"
            # A message never sent has no copy anywhere: sending it is safe even while no worker is alive.
            fix, held = requeue(job, may_be_queued=not never_sent)
            findings.append(
                Finding(
                    WAITING_WITHOUT_MESSAGE,
                    subject,
                    f"IN_PROGRESS, no lease, not in the DLQ, {why}; {quiet_text}",
                    held or "re-enqueue a fresh message (job_requeue_stuck)",
                    fix,
                )
            )
    return findings


def _why_dead_lettered(deliveries: selectors.Deliveries, received: int) -> str:
    """Why a waiting job's message ended in the DLQ, from what its row recorded: only what it shows."""
    if deliveries.attempts == 0:
        # A message SQS moved to the DLQ was received MARKET_JOBS_MAX_RECEIVE_COUNT times on the job queue, by workers;
        # every receive past those is a DLQ reader's (the doctor's scan, the redrive, job_inspect), this one included.
        max_receives = int(settings.MARKET_JOBS_MAX_RECEIVE_COUNT)
        by_workers = max_receives if received > max_receives else 0
        readers = received - by_workers
        if not by_workers:
            return (
                f"no worker ever received it: its {received} receive(s) were all DLQ readers' (the doctor, the "
                "redrive, job_inspect), so it reached the DLQ without a worker's receive: nothing in the worker logs"
            )
        return (
            f"no delivery ever claimed it: workers received its message {by_workers} times without a claim before "
            f"SQS moved it to the DLQ ({readers} later receive(s) by DLQ readers); read the worker logs around "
            "those receives"
        )
    if deliveries.lost:
        return f"its last {deliveries.lost} deliveries died without an outcome: read the worker logs for it"
    return "its deliveries ended without finishing it: read its history and the worker logs for it"


def _dlq_messages(scan: DlqScan, in_dlq: dict[str, list[DlqMessage]], *, actor: str) -> list[Finding]:
    findings = []
    jobs = {str(j.id): j for j in AsyncJob.objects.filter(id__in=list(in_dlq))}
    for job_id, messages in in_dlq.items():
        job = jobs.get(job_id)
        if job is not None and job.status == JobStatus.IN_PROGRESS:
            continue  # judged with the running jobs above
        reason = f"job is {job.status}" if job else "job no longer exists"
        for message in messages:
            findings.append(
                Finding(
                    DLQ_MESSAGE_FOR_FINISHED_JOB,
                    job_id,
                    f"DLQ message {message.message_id}; {reason}",
                    "drop the DLQ message (job_redrive_dlq drops it too)",
                    functools.partial(operator.dlq_drop, scan, message, job=job, actor=actor, reason=reason),
                )
            )
    for message in scan.messages:
        if message.job_id is None:
            findings.append(
                Finding(
                    DLQ_MESSAGE_NOT_A_JOB,
                    message.label,
                    f"not a job message; sent {stamp(message.sent_at)}",
                    f"none automatic: review, then {DROP_OTHER_TASKS} deletes such messages and nothing else",
                )
            )
    return findings


def _dlq_read(scan: DlqScan, counts: QueueCounts) -> list[Finding]:
    dlq = counts["dlq"]
    in_dlq = dlq.get("Visible", 0) + dlq.get("NotVisible", 0)
    if scan.read >= in_dlq:
        return []
    return [
        Finding(
            DLQ_READ_INCOMPLETE,
            "dlq",
            f"read {scan.read} of ~{in_dlq} DLQ message(s): {dlq.get('NotVisible', 0)} were held by another "
            "reader (a doctor, a redrive, job_inspect) and could not be judged",
            "none automatic: run the doctor again in a minute",
        )
    ]


def _queue_note(scan: DlqScan, counts: QueueCounts) -> str:
    q, d, m = counts["queue"], counts["dlq"], counts["maintenance"]
    return (
        f"main queue ~{q.get('Visible', 0)} waiting, {q.get('NotVisible', 0)} in flight, "
        f"{q.get('Delayed', 0)} delayed (counted, never received); DLQ ~{d.get('Visible', 0)} waiting, "
        f"{d.get('NotVisible', 0)} in flight, {scan.read} read; maintenance queue ~{total(m)}"
    )


def _budget_note(running: Sequence[AsyncJob], waits: Counter[str], now: datetime) -> str:
    budget = settings.DRS_MAX_IN_FLIGHT
    in_flight = sum(1 for job in running if job.lease_state(now) == LeaseState.HELD)
    of = f"of DRS_MAX_IN_FLIGHT {budget}" if budget > 0 else "(no budget)"
    waiting = ", ".join(f"{n} waiting for {what}" for what, n in sorted(waits.items())) or "none waiting"
    return f"DRS in flight {in_flight} {of}; {waiting} (waiting, not stalled: no finding, nothing re-sent)"


def _workers_note(fleet: list[Consumers], now: datetime) -> str:
    return "workers alive (heartbeat within {ttl}s): {alive}".format(
        ttl=int(selectors.worker_ttl().total_seconds()), alive=", ".join(f"{c.alive} on {c.queue}" for c in fleet)
    )
