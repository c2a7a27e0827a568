"""`manage.py job_purge_expired`: delete job records past their expiry, with their grants."""

from typing import Any

from django.conf import settings

from jobs import services as job_services
from jobs.management.commands._runbook import RunbookCommand


class Command(RunbookCommand):
    help = (
        f"Delete job records past their expiry ({settings.JOB_RECORD_TTL_DAYS} days after creation) with their "
        "history and grants (each token is invalidated at IMS first), grants whose job no longer "
        "exists, and the heartbeat rows of workers silent for WORKER_HEARTBEAT_RETENTION_SECONDS (dead "
        "workers). Beat runs it daily. Run it by hand when the job table grows. A job still IN_PROGRESS is "
        "never purged (finish it with job_mark_failed first). Dry run unless --apply."
    )
    filters = ("job", "older_than", "status", "code")
    older_than_help = "only records that expired at least this long ago (45s, 30m, 2h, 1d)"

    def run(self, options: dict[str, Any]) -> None:
        items = job_services.jobs_purge_expired(
            apply=self.apply, expired_for=self.older_than(options), filters=self.job_filter(options), now=self.now
        )
        for item in items:
            if item.kind == "job":
                self.item(
                    item.subject,
                    "purge",
                    item.detail,
                    item.done,
                    why_not="it is still IN_PROGRESS (finish it with job_mark_failed first), or already gone",
                )
            elif item.kind == "worker heartbeat":
                self.item(
                    item.subject, "forget dead worker", item.detail, item.done, why_not="it beat again, or is gone"
                )
            else:
                self.item(item.subject, "end orphaned grant", item.detail, item.done, why_not="its job exists again")
        self.summary(len(items), "expired records", done=sum(bool(i.done) for i in items), verb="purged")
