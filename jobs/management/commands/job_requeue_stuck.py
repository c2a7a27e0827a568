"""`manage.py job_requeue_stuck`: send a fresh message for IN_PROGRESS jobs nothing is working on."""

from typing import Any

from django.conf import settings

from jobs import display, selectors
from jobs import services as job_services
from jobs.display import ago
from jobs.management.commands._runbook import RunbookCommand, duration_text


class Command(RunbookCommand):
    help = (
        "Re-enqueue stuck jobs: IN_PROGRESS, no live lease, and no activity (no claim, checkpoint or message "
        "sent) for --older-than. Run it when the StuckInProgressJobs alarm fires or the doctor reports a job "
        "waiting with no message. Each job gets one fresh {jobId, type} message; the worker resumes from "
        "its checkpoints (DRS is not called again once a batch is persisted). A duplicate delivery is "
        "harmless: the lease lets one run. A job whose deliveries keep dying (a crash loop) is re-sent only "
        "when named with --job. Dry run unless --apply."
    )
    filters = ("job", "older_than")
    older_than_help = "only jobs with no activity for at least this long (45s, 30m, 2h, 1d)"
    older_than_default = duration_text(settings.JOB_STUCK_AFTER_SECONDS)

    def run(self, options: dict[str, Any]) -> None:
        filters = self.job_filter(options)
        self.report_missing(filters)
        named = set(filters.job_ids)
        jobs = list(selectors.jobs_stuck(quiet_for=self.older_than(options), filters=filters, now=self.now))
        done = looping = 0
        for job in jobs:
            deliveries = selectors.deliveries(job, now=self.now)
            detail = (
                f"last activity {ago(job.last_activity_at, self.now)}, lease {job.lease_state(self.now)}, "
                f"phase {job.phase}, attempts {deliveries.attempts}, lost deliveries {deliveries.lost}"
            )
            if deliveries.crash_looping_or_parked and job.id not in named:
                looping += 1
                self.needs_attention = True  # never re-sent unless named: what it does may kill workers
                self.stdout.write(
                    f"{job.id}  not re-enqueued  {detail}: its deliveries keep dying; read the worker "
                    f"logs for it, then name it with --job once the cause is fixed"
                )
                continue
            sent = job_services.job_requeue(job.id, actor=self.actor) if self.apply else None
            done += bool(sent)
            self.item(
                job.id,
                "re-enqueue",
                detail,
                sent,
                why_not="a worker took it meanwhile, or the send failed (see the job's history)",
            )
            if warning := display.resend_warning(job.id, deliveries):
                self.stdout.write(f"{job.id}  WARNING  {warning}")
        if not looping:
            self.summary(len(jobs), "stuck jobs", done=done, verb="re-enqueued")
            return
        # Jobs left alone are found too: a summary of "no stuck jobs" under a line about one would be false.
        alone = f"{looping} whose deliveries keep dying, left alone: name each with --job once its cause is fixed"
        if not self.apply:
            self.stdout.write(
                f"{len(jobs)} stuck jobs found ({alone}). Dry run: nothing changed; re-run with --apply to act."
            )
        else:
            self.stdout.write(f"{done} of {len(jobs)} stuck jobs re-enqueued; {len(jobs) - done} skipped ({alone}).")
