"""The retry decision: pure functions of the attempt count and settings, no database, no side effects.

`lease_claim` counts an attempt when a delivery takes a job, so while attempt N runs, `attempts == N`.
The runner asks two questions, at two moments:

- before running (`budget_spent_before_run`): N > JOB_MAX_ATTEMPTS means earlier deliveries used every
  attempt without ending the job (a worker that keeps crashing): fail at once, run nothing.
- after a retryable failure (`retry_decision`): N >= JOB_MAX_ATTEMPTS means this was the last attempt:
  the job is exhausted; otherwise retry after an exponential backoff.
"""

import math
import random
from dataclasses import dataclass

from django.conf import settings

SQS_MAX_DELAY_SECONDS = 900  # SQS's per-message delay limit


@dataclass(frozen=True)
class RetryDecision:
    """Retry after `delay_seconds`, or not at all (`exhausted`)."""

    exhausted: bool
    delay_seconds: int = 0


def retry_delay(attempt: int) -> int:
    """Exponential backoff after the `attempt`-th failure: base · 2^(attempt-1), capped by JOB_RETRY_MAX_SECONDS and
    by SQS's delay limit (SQS_MAX_DELAY_SECONDS)."""
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


def throttle_decision(throttles: int, retry_after: float | None) -> RetryDecision:
    """What to do after the `throttles`-th throttled delivery of a run (back-pressure: no attempt counted).

    Past JOB_MAX_THROTTLES the job is exhausted (it cannot wait for ever). Otherwise it is sent again after
    the service's `retry_after`, or without one JOB_FAIR_HOLD_SECONDS · 2^(throttles-1); either way at least
    1 s, at most JOB_THROTTLE_MAX_DELAY_SECONDS (and SQS_MAX_DELAY_SECONDS), plus up to 20 % jitter so jobs
    throttled together do not all come back in the same second."""
    if throttles >= settings.JOB_MAX_THROTTLES:
        return RetryDecision(exhausted=True)
    if retry_after is None:
        retry_after = settings.JOB_FAIR_HOLD_SECONDS * math.pow(2, min(max(throttles, 1) - 1, 10))
    ceiling = min(settings.JOB_THROTTLE_MAX_DELAY_SECONDS, SQS_MAX_DELAY_SECONDS)
    delay = max(1.0, min(float(ceiling), retry_after))
    return RetryDecision(
        exhausted=False, delay_seconds=int(min(ceiling, math.ceil(delay * (1 + random.random() * 0.2))))
    )
