"""`manage.py job_sweep_unsent`: re-publish jobs whose message never went out (same service as beat)."""

from datetime import timedelta
from typing import Any

from django.conf import settings

from jobs import services as job_services
from jobs.display import ago
from jobs.management.commands._runbook import RunbookCommand, duration_text
from jobs.models import AsyncJob


class Command(RunbookCommand):
    help = (
        "Re-publish IN_PROGRESS jobs whose queue message was never confirmed sent (a crash between the "
        "commit and the send), once --older-than has passed since their last change. Celery beat runs the "
        "same service every minute. Run it by hand when beat is down, or to see what it would do. Dry run "
        "unless --apply."
    )
    filters = ("older_than",)
    older_than_help = "grace period after the job's last change (45s, 30m, 2h, 1d)"
    older_than_default = duration_text(settings.JOB_ENQUEUE_GRACE_SECONDS)

    def run(self, options: dict[str, Any]) -> None:
        grace = int(self.older_than(options) / timedelta(seconds=1))
        jobs = job_services.jobs_sweep_unsent(grace_seconds=grace, apply=self.apply, actor=self.actor)
        sent = (
            set(
                AsyncJob.objects.filter(id__in=[j.id for j in jobs], message_sent_at__isnull=False).values_list(
                    "id", flat=True
                )
            )
            if self.apply
            else set()
        )
        for job in jobs:
            self.item(
                job.id,
                "re-publish",
                f"created {ago(job.created_at, self.now)}, never sent",
                (job.id in sent) if self.apply else None,
                why_not="the send failed (see the job's history)",
            )
        self.summary(len(jobs), "unsent jobs", done=len(sent), verb="re-published")
