"""What one delivery came to (`Outcome`), and the one place an outcome becomes a log line and a metric.

The runner returns an Outcome; the task logs it and counts it here. Nothing parses it back from a string.
"""

import logging
from dataclasses import dataclass
from typing import Literal

from serenity import metrics

log = logging.getLogger(__name__)

Kind = Literal["completed", "failed", "retry", "dropped", "stopped", "held", "parked"]

# One EMF count per kind (namespace SpacecatSerenityMarketWorker, dimension Environment only).
METRIC_BY_KIND = {
    "completed": "JobsCompleted",
    "failed": "JobsFailed",
    "retry": "JobsRetried",
    "dropped": "JobsDropped",
    "stopped": "JobsStopped",
    "held": "JobsHeldBack",
    "parked": "JobsParked",
}


@dataclass(frozen=True)
class Outcome:
    """`kind`: completed | failed | retry | dropped | stopped | held | parked. `code`: the error code (failed, retry) or
    the reason (dropped: missing, malformed, not_in_progress, type_mismatch, lease_held; stopped: lease_lost;
    held: fair_share, the fairness rule sent the job again for later; drs_budget, the fleet's DRS budget did;
    a back-pressure code such as DRS_THROTTLED or SEMRUSH_THROTTLED, a throttled call did, its attempt given back;
    parked: crash_loop, the job was parked instead of run, its message deleted, until an operator names it)."""

    kind: Kind
    code: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.code}" if self.code else self.kind


COMPLETED = Outcome("completed")


def record_outcome(outcome: Outcome, *, job_id: str) -> None:
    """Log the outcome of a delivery and count it (one EMF line)."""
    log.info("job delivery handled", extra={"job_id": job_id, "outcome": outcome.kind, "code": outcome.code})
    # A failure is also counted per error code (a bounded set), so an alarm can page on RETRIES_EXHAUSTED
    # or ENQUEUE_FAILED without paging on PROMPT_GENERATION_HELD, which is DRS working as designed.
    breakdown = {"ErrorCode": outcome.code} if outcome.kind == "failed" and outcome.code else None
    metrics.emit(breakdown, **{METRIC_BY_KIND[outcome.kind]: (1, metrics.COUNT)})
