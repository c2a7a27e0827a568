"""The retry decision: pure functions of the attempt count and settings, no database, no side effects.

`lease_claim` counts an attempt when a delivery takes a job, so while attempt N runs, `attempts == N`.
The runner asks two questions, at two moments:

- before running (`budget_spent_before_run`): N > JOB_MAX_ATTEMPTS means earlier deliveries used every
  attempt without ending the job (a worker that keeps crashing): fail at once, run nothing.
- after a retryable failure (`retry_decision`): N >= JOB_MAX_ATTEMPTS means this was the last attempt:
  the job is exhausted; otherwise retry after an exponential backoff.
"""

import math
from dataclasses import dataclass

from django.conf import settings

SQS_MAX_DELAY_SECONDS = 900  # SQS's per-message delay limit


@dataclass(frozen=True)
class RetryDecision:
    """Retry after `delay_seconds`, or not at all (`exhausted`)."""

    exhausted: bool
    delay_seconds: int = 0


def retry_delay(attempt: int) -> int:
    """Exponential backoff after the `attempt`-th failure: base · 2^(attempt-1), capped by settings and by
    SQS's 900 s delay limit."""
    delay = settings.JOB_RETRY_BASE_SECONDS * math.pow(2, max(attempt, 1) - 1)
    return int(min(settings.JOB_RETRY_MAX_SECONDS, SQS_MAX_DELAY_SECONDS, delay))


def budget_spent_before_run(attempts: int) -> bool:
    """True when the delivery about to run is beyond the attempt budget (see the module docstring)."""
    return attempts > settings.JOB_MAX_ATTEMPTS


def retry_decision(attempts: int) -> RetryDecision:
    """What to do after attempt number `attempts` failed with a retryable error."""
    if attempts >= settings.JOB_MAX_ATTEMPTS:
        return RetryDecision(exhausted=True)
    return RetryDecision(exhausted=False, delay_seconds=retry_delay(attempts))
