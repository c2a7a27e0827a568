"""The probe (Celery beat and `manage.py job_probe`): one EMF line of gauges an alarm pages on, never a job change.

From the database:
- `StuckInProgressJobs`: jobs IN_PROGRESS with no activity for JOB_STUCK_AFTER_SECONDS (the lease TTL plus the
  longest retry delay), but for those waiting for a place in the DRS budget or out a delay (jobs/selectors.py
  `waiting_not_stuck_q`): waiting is not stuck, unless the queue holds nothing at all (then what waits for a
  budget place has no message);
- `DrsInFlight` of `DrsMaxInFlight`: generations under a live lease, against the fleet's DRS budget;
- `JobsWaitingForBudget`, `OldestBudgetWaitSeconds`: jobs waiting for a budget place, and the longest such wait,
  so a dashboard sees the budget bind long before anything looks stuck;
- `DrsBudgetStalled`: 1 when the budget is full and no job ended for a whole delivery budget
  (JOB_TASK_TIME_LIMIT_SECONDS): every running delivery hangs, and the waiting ones with them (the alarm);
- `NeedsReauthBacklog`: unexpired jobs FAILED with NEEDS_REAUTH;
- `WorkersAlive`: worker processes consuming the market-jobs queue whose heartbeat is fresh (jobs/worker/heartbeats.py).
From the queues' approximate counts (nothing is received):
- `JobMessagesWithoutConsumer`: the market-jobs queue's messages (waiting, in flight, delayed) while no worker is
  alive to take them, else 0;
- `MaintenanceQueueDepth`: messages waiting on the maintenance queue (the sweeper's and the purge's).

Beat runs the probe itself (serenity/beat.py), every minute, so it reports exactly when no worker is alive.
Every gauge goes out with an explicit 0 when there is nothing to count, and a gauge that could not be read is
left out of the line, never sent as 0: a missing data point alarms as "no data", a false 0 would hide the
problem. Nothing at all goes out when the database cannot be read.
"""

import logging
from datetime import datetime

from django.conf import settings

from jobs import selectors
from jobs.clients import sqs
from jobs.dlq import queue_counts, total
from serenity import metrics

log = logging.getLogger(__name__)


def run_probe(*, now: datetime | None = None) -> dict[str, int] | None:
    """Count, emit one EMF line, and return the gauges it emitted; None (logged, nothing emitted) when the
    database could not be read. The queue gauges are left out (logged) when SQS cannot be read. Read-only,
    safe to run at any time."""
    try:
        counts = selectors.probe_counts(now=now)
    except Exception as exc:  # any failure to read means "unknown", which must never look like 0
        log.error("job probe query failed; no metrics emitted", extra={"reason": type(exc).__name__})
        return None
    values = {
        "StuckInProgressJobs": counts.stuck_in_progress,
        "NeedsReauthBacklog": counts.needs_reauth_backlog,
        "WorkersAlive": counts.workers_alive,
        "DrsInFlight": counts.in_flight,
        "DrsMaxInFlight": int(settings.DRS_MAX_IN_FLIGHT),
        "JobsWaitingForBudget": counts.budget_waiting,
        "OldestBudgetWaitSeconds": counts.oldest_budget_wait_seconds,
        "DrsBudgetStalled": int(counts.budget_stalled),
    }
    try:
        queues = queue_counts("queue", "maintenance")
    except sqs.AWSError as exc:
        log.error(
            "job probe could not read the queues; queue metrics not emitted", extra={"reason": type(exc).__name__}
        )
    else:
        values["JobMessagesWithoutConsumer"] = 0 if counts.workers_alive else total(queues["queue"])
        if not total(queues["queue"]):  # nothing queued: the jobs "waiting for a budget place" have no message
            values["StuckInProgressJobs"] += counts.budget_waiting_quiet
        values["MaintenanceQueueDepth"] = queues["maintenance"].get("Visible", 0)
    units = {"OldestBudgetWaitSeconds": metrics.SECONDS}
    metrics.emit(breakdown=None, **{name: (value, units.get(name, metrics.COUNT)) for name, value in values.items()})
    if counts.stuck_in_progress:
        log.warning("jobs stuck in progress", extra={"count": counts.stuck_in_progress})
    if not counts.workers_alive:
        log.warning(
            "no worker alive on the market-jobs queue", extra={"messages": values.get("JobMessagesWithoutConsumer")}
        )
    return values


def needs_a_human(values: dict[str, int]) -> bool:
    """Whether what the probe saw is something an operator must act on: stuck jobs, no worker alive, or a queue
    that could not be read. (Jobs awaiting re-authorisation wait for their users, not for an operator.)"""
    return bool(
        values["StuckInProgressJobs"]
        or values.get("DrsBudgetStalled")
        or not values["WorkersAlive"]
        or "JobMessagesWithoutConsumer" not in values
    )
