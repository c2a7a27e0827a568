"""`manage.py job_release_leases`: clear expired leases on IN_PROGRESS jobs."""

from typing import Any

from jobs import selectors
from jobs import services as job_services
from jobs.display import ago, stamp
from jobs.management.commands._runbook import RunbookCommand


class Command(RunbookCommand):
    help = (
        "Release leases that expired on IN_PROGRESS jobs: the worker that held them died or hung. Run it when "
        "job_inspect or the doctor shows 'lease expired'; the job's next delivery (SQS redelivers after the "
        "visibility timeout, or job_requeue_stuck) then claims it afresh. Never touches a live lease. Dry "
        "run unless --apply."
    )
    filters = ("job", "older_than")
    older_than_help = "only leases that expired at least this long ago (45s, 30m, 2h, 1d)"

    def run(self, options: dict[str, Any]) -> None:
        filters = self.job_filter(options)
        self.report_missing(filters)
        jobs = list(
            selectors.jobs_with_stale_lease(expired_for=self.older_than(options), filters=filters, now=self.now)
        )
        done = 0
        for job in jobs:
            released = job_services.job_release_stale_lease(job.id, actor=self.actor) if self.apply else None
            done += bool(released)
            self.item(
                job.id,
                "release stale lease",
                f"lease expired {stamp(job.lease_expires_at)} ({ago(job.lease_expires_at, self.now)}), "
                f"attempts {job.attempts}, phase {job.phase}",
                released,
                why_not="lease renewed, taken over or job finished meanwhile",
            )
        self.summary(len(jobs), "stale leases", done=done, verb="released")
