"""Reading the market-jobs DLQ (a held, released-on-exit scan) and the queues' counts, for the operator
services, the doctor and job_inspect. Nothing here re-sends or decides: `DlqScan.delete` removes one message
when the operator services (services/operator.py, redrive and drop) have dealt with it."""

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache

from jobs import runbook_signals
from jobs.clients import sqs
from jobs.messages import decode_job_message, task_name

log = logging.getLogger(__name__)


@dataclass
class DlqMessage:
    message_id: str
    receipt_handle: str = field(repr=False)
    job_id: str | None
    job_type: str | None
    sent_at: datetime | None
    # SQS counts every receive, operators' reads of the DLQ included: not how often workers failed it.
    receive_count: int
    task: str | None = None  # the Celery task it calls; for a message that is not a job message

    @property
    def label(self) -> str:
        """How a line names the message: its job, or the task it calls, or `unreadable`."""
        return self.job_id or f"message {self.message_id} ({self.task or 'not a Celery message'})"


def _message(raw: dict[str, Any]) -> DlqMessage:
    attrs = raw.get("Attributes", {})
    decoded = decode_job_message(raw.get("Body", ""))
    sent = attrs.get("SentTimestamp")
    return DlqMessage(
        message_id=raw["MessageId"],
        receipt_handle=raw["ReceiptHandle"],
        job_id=decoded[0] if decoded else None,
        job_type=decoded[1] if decoded else None,
        sent_at=datetime.fromtimestamp(int(sent) / 1000, UTC) if sent else None,
        receive_count=int(attrs.get("ApproximateReceiveCount", 0)),
        task=task_name(raw.get("Body", "")),
    )


class DlqScan:
    """The DLQ's messages, held invisible while a command decides on them; use as a context manager.

    SQS offers no read without a receive. Receiving from the DLQ is harmless (the DLQ has no redrive
    policy of its own, so a receive never moves a message on), whereas the main queue is never received
    from here: each receive there counts towards maxReceiveCount and would push live work to the DLQ.
    Messages are held for `hold_seconds`, as short as a read and its decisions need, and every message not
    deleted is made visible again on the way out, an interrupted read included: each receive and the
    record of what it returned is one step an interrupt does not cut (jobs/runbook_signals.py), so no message
    is ever held without the scan knowing its receipt handle. A dry run leaves the DLQ as it found it.
    """

    def __init__(self, *, limit: int = 1000, hold_seconds: int = 30, url: str | None = None):
        self.url = url or settings.MARKET_JOBS_DLQ_URL
        self.limit = limit
        self.hold_seconds = hold_seconds
        self.messages: list[DlqMessage] = []
        self._seen: dict[str, DlqMessage] = {}
        self._settled: set[str] = set()  # deleted, or released: nothing more to do for them

    def __enter__(self) -> "DlqScan":
        try:
            while len(self._seen) < self.limit:
                with runbook_signals.deferred():
                    fresh = self._receive()
                if not fresh:
                    break
        except BaseException:
            self._release()  # what was received so far must not stay held for the whole hold
            raise
        self.messages = sorted(self._seen.values(), key=lambda m: m.sent_at or datetime.min.replace(tzinfo=UTC))
        return self

    def _receive(self) -> int:
        """One receive; records every message it returned. Returns how many were new to this scan."""
        batch = sqs.receive(self.url, max_messages=min(10, self.limit - len(self._seen)), visibility=self.hold_seconds)
        fresh = 0
        for raw in batch:
            message = _message(raw)
            fresh += message.message_id not in self._seen
            self._seen[message.message_id] = message  # a message seen twice keeps its latest receipt handle
        return fresh

    def delete(self, message: DlqMessage) -> None:
        with runbook_signals.deferred():
            sqs.delete(self.url, message.receipt_handle)
            self._settled.add(message.message_id)

    def __exit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        """Make every held message that was not deleted visible again at once (10 per call)."""
        held = [m for m in self._seen.values() if m.message_id not in self._settled]
        with runbook_signals.deferred():
            for start in range(0, len(held), 10):
                batch = held[start : start + 10]
                try:
                    unchanged = sqs.change_visibility_batch(self.url, [m.receipt_handle for m in batch], 0)
                except sqs.AWSError as error:  # they reappear on their own when the hold ends
                    log.warning(
                        "DLQ messages not released", extra={"count": len(batch), "reason": type(error).__name__}
                    )
                    continue
                if unchanged:
                    log.warning("DLQ messages not released", extra={"count": len(unchanged)})
            self._settled.update(m.message_id for m in held)

    @property
    def read(self) -> int:
        """How many distinct messages the scan read."""
        return len(self._seen)

    def by_job(self) -> dict[str, list[DlqMessage]]:
        out: dict[str, list[DlqMessage]] = {}
        for m in self.messages:
            if m.job_id:
                out.setdefault(m.job_id, []).append(m)
        return out


QUEUES = {"queue": "MARKET_JOBS_QUEUE_URL", "dlq": "MARKET_JOBS_DLQ_URL", "maintenance": "MAINTENANCE_QUEUE_URL"}
# `{"queue": {"Visible": 3, "NotVisible": 1, "Delayed": 0}, "dlq": {...}, ...}`
QueueCounts = dict[str, dict[str, int]]


def queue_counts(*names: str) -> QueueCounts:
    """Approximate message counts (`Visible` waiting, `NotVisible` in flight, `Delayed`) of the market-jobs queue
    (`queue`), its DLQ (`dlq`) and the maintenance queue (`maintenance`), or of the ones named. No message is
    touched."""
    return {name: sqs.approximate_counts(getattr(settings, QUEUES[name])) for name in names or QUEUES}


def total(counts: dict[str, int]) -> int:
    """Every message a queue holds: waiting, in flight and delayed."""
    return counts.get("Visible", 0) + counts.get("NotVisible", 0) + counts.get("Delayed", 0)


DLQ_MEMBERS_CACHE_KEY = "jobs:dlq-job-ids"


def dlq_job_ids(*, max_age_seconds: int = 60) -> frozenset[str] | None:
    """The ids of the jobs with a message in the DLQ, read at most once per `max_age_seconds` across every
    process (the shared cache), for the admin's job list: each read is a receive, and a page refresh must
    not keep the DLQ's messages in flight. None when the DLQ cannot be read."""
    cached = cache.get(DLQ_MEMBERS_CACHE_KEY)
    if cached is not None:
        return frozenset(cached)
    try:
        with DlqScan(hold_seconds=10) as scan:
            ids = frozenset(scan.by_job())
    except sqs.AWSError as exc:
        log.warning("DLQ unreadable for the job list", extra={"reason": type(exc).__name__})
        return None
    cache.set(DLQ_MEMBERS_CACHE_KEY, sorted(ids), max_age_seconds)
    return ids
