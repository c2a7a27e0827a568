"""`manage.py job_rerun`: put jobs that failed retryably back to work once an outage is over."""

from typing import Any

from jobs import selectors
from jobs import services as job_services
from jobs.display import ago
from jobs.management.commands._runbook import RunbookCommand
from jobs.models import JobStatus


class Command(RunbookCommand):
    help = (
        "Re-run FAILED jobs whose error is retryable (RETRIES_EXHAUSTED: Semrush, IMS or DRS was down longer "
        "than the retries lasted) under the same id, with the credential each job retained, resuming from its "
        "checkpoints. Run it once the outage is over (see the playbooks in docs/operations.md); a job with no "
        "credential left is skipped: its user regenerates it from the UI. A job named with --job that cannot be "
        "re-run (one a market's delete cancelled, MARKET_DELETED, above all) is named with the reason. Narrow with "
        "--job, --code or --older-than. Dry run unless --apply."
    )
    filters = ("job", "older_than", "code")
    older_than_help = "only jobs that ended at least this long ago (45s, 30m, 2h, 1d)"

    def run(self, options: dict[str, Any]) -> None:
        filters = self.job_filter(options)
        self.report_missing(filters)
        qs = selectors.jobs_filtered(filters).filter(
            status=JobStatus.FAILED, error__retryable=True, ended_at__lte=self.now - self.older_than(options)
        )
        jobs = list(qs.order_by("ended_at", "id"))
        if filters.job_ids:  # a job the operator named that is not one to re-run: what it is, and why
            for named in selectors.jobs_filtered(filters).exclude(id__in=[job.id for job in jobs]):
                if named.status in (JobStatus.IN_PROGRESS, JobStatus.COMPLETED):  # at work or done (a second run)
                    self.stdout.write(f"{named.id}  nothing to re-run  it is {named.status}")
                    continue
                self.needs_attention = True  # cancelled by a market's delete, say: the operator must know
                why = job_services.rerun_refusal(named) or "it ended more recently than --older-than"
                self.stdout.write(f"{named.id}  cannot re-run  {why}")
        done = 0
        for job in jobs:
            rerun = job_services.job_rerun(job.id, actor=self.actor) if self.apply else None
            done += bool(rerun and rerun.done)
            self.item(
                job.id,
                "re-run",
                f"{job.error_code}, ended {ago(job.ended_at, self.now)}, phase {job.phase}",
                rerun.done if rerun else None,
                why_not=rerun.why_not if rerun else "",
            )
        self.summary(len(jobs), "retryable failed jobs", done=done, verb="re-run")
