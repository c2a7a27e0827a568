"""Operator services behind the runbook commands, the admin actions and the doctor: reading the DLQ,
the lease-aware redrive, and purging expired records. Every write is conditional, so each is safe to
repeat; the simpler operator writes (mark failed, release a stale lease, re-enqueue) are in jobs.services.
"""
import base64
import binascii
import getpass
import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs import states
from jobs.clients import sqs
from jobs.models import AsyncJob
from jobs.selectors import JobFilter, lease_state_q
from jobs.services import job_publish
from tokens import services as grants

log = logging.getLogger(__name__)

RUN_TASK = "jobs.run"


def cli_actor() -> str:
    """Who a runbook command acts as, for the job history: `cli:<os user>`."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # containers often run as a uid with no passwd entry
        return "cli:unknown"


# --- Reading queue messages ------------------------------------------------------------------------------

def decode_job_message(body: str) -> tuple[str, str | None] | None:
    """`(jobId, type)` from a job message as Celery puts it on SQS, or None when the body is not one.

    kombu's SQS transport sends base64 of a JSON envelope whose `body` is base64 of the JSON task call
    `[args, kwargs, embed]`; a job message has kwargs `{jobId, type}`.
    """
    try:
        text = body if body.lstrip().startswith("{") else base64.b64decode(body, validate=True).decode()
        envelope = json.loads(text)
        if envelope.get("headers", {}).get("task") != RUN_TASK:
            return None
        inner = envelope["body"]
        if envelope.get("properties", {}).get("body_encoding", "base64") == "base64":
            inner = base64.b64decode(inner).decode()
        _args, kwargs, _embed = json.loads(inner)
        job_id = str(uuid.UUID(str(kwargs["jobId"])))
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error, UnicodeDecodeError):
        return None
    job_type = kwargs.get("type")
    return job_id, job_type if isinstance(job_type, str) else None


@dataclass
class DlqMessage:
    message_id: str
    receipt_handle: str = field(repr=False)
    job_id: str | None
    job_type: str | None
    sent_at: datetime | None
    receive_count: int


def _message(raw: dict) -> DlqMessage:
    attrs = raw.get("Attributes", {})
    decoded = decode_job_message(raw.get("Body", ""))
    sent = attrs.get("SentTimestamp")
    return DlqMessage(
        message_id=raw["MessageId"], receipt_handle=raw["ReceiptHandle"],
        job_id=decoded[0] if decoded else None, job_type=decoded[1] if decoded else None,
        sent_at=datetime.fromtimestamp(int(sent) / 1000, UTC) if sent else None,
        receive_count=int(attrs.get("ApproximateReceiveCount", 0)),
    )


class DlqScan:
    """The DLQ's messages, held invisible while a command decides on them; use as a context manager.

    SQS offers no read without a receive. Receiving from the DLQ is harmless (the DLQ has no redrive
    policy of its own, so a receive never moves a message on), whereas the main queue is never received
    from here: each receive there counts towards maxReceiveCount and would push live work to the DLQ.
    Messages are held for `hold_seconds` (long enough to decide on a few thousand), and every message
    not deleted is made visible again on exit, so a dry run leaves the DLQ as it found it.
    """

    def __init__(self, *, limit: int = 1000, hold_seconds: int = 120, url: str | None = None):
        self.url = url or settings.MARKET_JOBS_DLQ_URL
        self.limit = limit
        self.hold_seconds = hold_seconds
        self.messages: list[DlqMessage] = []
        self._deleted: set[str] = set()

    def __enter__(self) -> "DlqScan":
        seen: dict[str, DlqMessage] = {}
        while len(seen) < self.limit:
            batch = sqs.receive(self.url, max_messages=min(10, self.limit - len(seen)), visibility=self.hold_seconds)
            received = [_message(raw) for raw in batch]
            fresh = [m for m in received if m.message_id not in seen]
            for m in received:
                seen[m.message_id] = m  # a message seen twice keeps its latest receipt handle
            if not fresh:
                break
        self.messages = sorted(seen.values(), key=lambda m: (m.sent_at or datetime.min.replace(tzinfo=UTC)))
        return self

    def delete(self, message: DlqMessage) -> None:
        sqs.delete(self.url, message.receipt_handle)
        self._deleted.add(message.message_id)

    def __exit__(self, *exc) -> None:
        for m in self.messages:
            if m.message_id in self._deleted:
                continue
            try:
                sqs.change_visibility(self.url, m.receipt_handle, 0)
            except sqs.AWSError as error:  # it reappears on its own when the hold ends
                log.warning("DLQ message not released", extra={"message_id": m.message_id,
                                                               "reason": type(error).__name__})

    def by_job(self) -> dict[str, list[DlqMessage]]:
        out: dict[str, list[DlqMessage]] = {}
        for m in self.messages:
            if m.job_id:
                out.setdefault(m.job_id, []).append(m)
        return out


def queue_counts() -> dict:
    """Approximate message counts of the market-jobs queue and its DLQ (no message is touched)."""
    return {"queue": sqs.approximate_counts(settings.MARKET_JOBS_QUEUE_URL),
            "dlq": sqs.approximate_counts(settings.MARKET_JOBS_DLQ_URL)}


# --- DLQ redrive -------------------------------------------------------------------------------------

RESEND, DROP, KEEP = "resend", "drop", "keep"


@dataclass
class RedriveItem:
    message: DlqMessage
    verdict: str  # resend | drop | keep
    reason: str
    done: bool | None = None  # None in a dry run; otherwise whether the verdict was carried out


def redrive_verdict(job: AsyncJob | None, *, now=None) -> tuple[str, str]:
    """What the redrive does with a DLQ message of `job` (None: the job does not exist)."""
    now = now or timezone.now()
    if job is None:
        return DROP, "job no longer exists"
    if job.status != states.IN_PROGRESS:
        return DROP, f"job is {job.status}"
    if job.lease_state(now) == "held":
        return KEEP, f"a worker holds the lease until {job.lease_expires_at:%Y-%m-%dT%H:%M:%SZ}; re-run later"
    return RESEND, f"job is IN_PROGRESS with no live lease (attempts {job.attempts})"


def job_redrive(job_id, *, actor: str) -> bool:
    """Publish a fresh message for a job whose message died in the DLQ, only when it is IN_PROGRESS with
    no live lease (decided again here, at the moment of sending). True when sent."""
    job = AsyncJob.objects.filter(id=job_id, status=states.IN_PROGRESS).exclude(lease_state_q("held")).first()
    if job is None:
        return False
    states.record(job.id, "redriven", actor=actor, detail="fresh message for one found in the DLQ")
    return job_publish(job.id, job.job_type)


def dlq_redrive(*, apply: bool, actor: str, filters: JobFilter = JobFilter(), limit: int = 1000) -> list[RedriveItem]:
    """Lease-aware redrive of the market-jobs DLQ; run by an operator only, never automatically.

    Per message (in the order they were first sent):
    1. Not a job message: kept, reported.
    2. Job missing or finished: dropped (deleted from the DLQ), reported.
    3. Job IN_PROGRESS under a live lease: kept (a worker owns it; the next run decides).
    4. Job IN_PROGRESS with no live lease: a fresh message is published (never the old body), then the
       DLQ copy is deleted; further copies for the same job are dropped as duplicates.
    A dry run decides and reports, and leaves every message where it was. Messages of jobs outside
    `filters` are left untouched and unreported.
    """
    items: list[RedriveItem] = []
    with DlqScan(limit=limit) as scan:
        ids = {m.job_id for m in scan.messages if m.job_id}
        jobs = {str(j.id): j for j in AsyncJob.objects.filter(id__in=ids)}
        resent: set[str] = set()
        for message in scan.messages:
            job = jobs.get(message.job_id) if message.job_id else None
            if not _matches(message, job, filters):
                continue
            if message.job_id is None:
                items.append(RedriveItem(message, KEEP, "not a job message"))
                continue
            verdict, reason = redrive_verdict(job)
            if verdict == RESEND and message.job_id in resent:
                verdict, reason = DROP, "duplicate of a message already re-sent in this run"
            if verdict == RESEND:
                resent.add(message.job_id)
            item = RedriveItem(message, verdict, reason)
            items.append(item)
            if apply:
                item.done = _carry_out(scan, item, job, actor)
    return items


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
        if not job_redrive(job.id, actor=actor):
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


# --- Purge -----------------------------------------------------------------------------------------------

def job_purge(job_id, *, now=None) -> bool:
    """Delete one expired, finished job record (its history goes with it) and its grant in one transaction,
    then invalidate its token at IMS (best effort, after commit: a network call must not hold the row lock).
    A job still IN_PROGRESS is never purged: a worker or a delayed retry may be on it; an operator finishes
    it first (job_mark_failed). True when deleted."""
    now = now or timezone.now()
    with transaction.atomic():
        job = (AsyncJob.objects.select_for_update().filter(id=job_id, expires_at__lte=now)
               .exclude(status=states.IN_PROGRESS).first())
        if job is None:
            return False
        taken = grants.grant_take(job_id)
        job.delete()
    taken.invalidate()
    return True


def grant_purge_orphan(job_id) -> bool:
    """End a grant whose job no longer exists (token invalidated, grant deleted). False if the job exists."""
    if AsyncJob.objects.filter(id=job_id).exists():
        return False
    with transaction.atomic():
        taken = grants.grant_take(job_id)
    taken.invalidate()
    return True
