"""A delivery's outcome is a value; one place turns it into a log line and one EMF count."""

import logging

import pytest

from jobs.outcomes import COMPLETED, Outcome, record_outcome


@pytest.mark.parametrize(
    ("outcome", "metric", "breakdown"),
    [
        (COMPLETED, "JobsCompleted", {}),
        (Outcome("failed", "RETRIES_EXHAUSTED"), "JobsFailed", {"ErrorCode": "RETRIES_EXHAUSTED"}),
        (Outcome("retry", "DRS_TRANSIENT"), "JobsRetried", {}),
        (Outcome("dropped", "missing"), "JobsDropped", {}),
        (Outcome("stopped", "lease_lost"), "JobsStopped", {}),
    ],
)
def test_each_outcome_is_logged_and_counted_once(outcome, metric, breakdown, metric_lines, caplog):
    caplog.set_level(logging.INFO, logger="jobs.outcomes")

    record_outcome(outcome, job_id="job-1")

    assert [{k: v for k, v in line.items() if k != "_aws"} for line in metric_lines] == [
        {"Environment": "test", **breakdown, metric: 1}
    ]
    dimensions = metric_lines[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    assert dimensions == [["Environment"], *([["Environment", "ErrorCode"]] if breakdown else [])]
    (line,) = [r for r in caplog.records if r.name == "jobs.outcomes"]
    assert (line.getMessage(), line.job_id, line.outcome, line.code) == (
        "job delivery handled",
        "job-1",
        outcome.kind,
        outcome.code,
    )


def test_an_outcome_reads_as_kind_and_code():
    assert (str(COMPLETED), str(Outcome("failed", "NEEDS_REAUTH"))) == ("completed", "failed:NEEDS_REAUTH")
