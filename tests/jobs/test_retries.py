"""The retry decision is a pure function of the attempt count and the settings: no database needed."""

import pytest

from jobs import retries


@pytest.mark.parametrize(("attempt", "expected"), [(1, 30), (2, 60), (3, 120), (5, 480), (6, 900), (12, 900)])
def test_the_delay_doubles_and_never_exceeds_the_sqs_limit(settings, attempt, expected):
    settings.JOB_RETRY_BASE_SECONDS = 30
    settings.JOB_RETRY_MAX_SECONDS = 3600
    assert retries.retry_delay(attempt) == expected


def test_the_delay_is_capped_by_the_setting_below_the_sqs_limit(settings):
    settings.JOB_RETRY_BASE_SECONDS, settings.JOB_RETRY_MAX_SECONDS = 30, 100
    assert retries.retry_delay(4) == 100


def test_a_failed_attempt_below_the_budget_is_retried_after_its_backoff(settings):
    settings.JOB_MAX_ATTEMPTS, settings.JOB_RETRY_BASE_SECONDS = 5, 30
    assert retries.retry_decision(2) == retries.RetryDecision(exhausted=False, delay_seconds=60)


def test_the_last_attempt_failing_exhausts_the_job(settings):
    settings.JOB_MAX_ATTEMPTS = 5
    assert retries.retry_decision(5) == retries.RetryDecision(exhausted=True)


def test_only_a_delivery_beyond_the_budget_is_refused_before_it_runs(settings):
    # The claim counts the attempt: attempt 5 of 5 may run; a 6th delivery means earlier ones crashed.
    settings.JOB_MAX_ATTEMPTS = 5
    assert [retries.budget_spent_before_run(n) for n in (1, 5, 6)] == [False, False, True]


@pytest.mark.parametrize(
    ("throttles", "retry_after", "low", "high"),
    [(1, 7.0, 7, 9), (1, 0.0, 1, 2), (1, 3600.0, 120, 120), (1, None, 10, 12), (3, None, 40, 48), (9, None, 120, 120)],
)
def test_a_throttle_waits_the_services_retry_after_or_its_own_backoff_within_the_bounds(
    settings, throttles, retry_after, low, high
):
    settings.JOB_MAX_THROTTLES, settings.JOB_FAIR_HOLD_SECONDS, settings.JOB_THROTTLE_MAX_DELAY_SECONDS = 40, 10, 120
    decision = retries.throttle_decision(throttles, retry_after)
    assert not decision.exhausted and low <= decision.delay_seconds <= high


def test_the_last_throttle_allowed_ends_the_run(settings):
    settings.JOB_MAX_THROTTLES = 40
    assert retries.throttle_decision(39, 1.0).exhausted is False
    assert retries.throttle_decision(40, 1.0) == retries.RetryDecision(exhausted=True)
