"""The stuck-jobs probe (Celery beat and `manage.py job_probe`): two EMF gauges, never a job change.

`StuckInProgressJobs` counts jobs IN_PROGRESS with no activity for JOB_STUCK_AFTER_SECONDS (the lease
TTL plus the longest retry delay, about 31 minutes); `NeedsReauthBacklog` counts unexpired jobs FAILED
with NEEDS_REAUTH. Beat runs the probe itself (serenity/beat.py), so it reports even when no worker is
alive. Both go out in one line with an explicit 0 when there are none, and nothing at all goes out
when the query fails: a missing data point alarms as "no data", a false 0 would hide the problem.
"""
import logging

from jobs import selectors
from serenity import metrics

log = logging.getLogger(__name__)


def run_probe(*, now=None) -> dict | None:
    """Count, emit one EMF line, and return `{StuckInProgressJobs, NeedsReauthBacklog}`; None (logged,
    nothing emitted) when the counts could not be read. Read-only, safe to run at any time."""
    try:
        counts = selectors.probe_counts(now=now)
    except Exception as exc:  # any failure to read means "unknown", which must never look like 0
        log.error("job probe query failed; no metrics emitted", extra={"reason": type(exc).__name__})
        return None
    values = {"StuckInProgressJobs": counts.stuck_in_progress, "NeedsReauthBacklog": counts.needs_reauth_backlog}
    metrics.emit(**{name: (value, metrics.COUNT) for name, value in values.items()})
    if counts.stuck_in_progress:
        log.warning("jobs stuck in progress", extra={"count": counts.stuck_in_progress})
    return values
