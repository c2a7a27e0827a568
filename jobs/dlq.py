"""Reading the market-jobs DLQ (a held, released-on-exit scan) and the queues' counts, for the operator
services, the doctor and job_inspect. Nothing here deletes or re-sends; see services/operator.py."""
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache

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


def _message(raw: dict) -> DlqMessage:
    attrs = raw.get("Attributes", {})
    decoded = decode_job_message(raw.get("Body", ""))
    sent = attrs.get("SentTimestamp")
    return DlqMessage(
        message_id=raw["MessageId"], receipt_handle=raw["ReceiptHandle"],
        job_id=decoded[0] if decoded else None, job_type=decoded[1] if decoded else None,
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
    deleted is made visible again on exit (the runbook commands turn SIGTERM into that exit too), so a dry
    run leaves the DLQ as it found it and an interrupted one hides nothing for long.
    """

    def __init__(self, *, limit: int = 1000, hold_seconds: int = 30, url: str | None = None):
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
