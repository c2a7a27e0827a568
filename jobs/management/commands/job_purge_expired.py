"""`manage.py job_purge_expired`: delete job records past their expiry, with their grants."""
from django.conf import settings

from jobs import operations, selectors
from jobs.management.commands._runbook import RunbookCommand
from jobs.selectors import ago, stamp


class Command(RunbookCommand):
    help = (
        f"Delete job records past their expiry ({settings.JOB_RECORD_TTL_DAYS} days after creation) with their "
        "history and grants (each token is invalidated at IMS first), and grants whose job no longer "
        "exists. Beat runs it daily. Run it by hand when the job table grows. A job still IN_PROGRESS is "
        "never purged (finish it with job_mark_failed first). Dry run unless --apply."
    )
    filters = ("job", "older_than", "status", "code")
    older_than_help = "only records that expired at least this long ago (45s, 30m, 2h, 1d)"

    def run(self, options):
        filters = self.job_filter(options)
        jobs = list(selectors.jobs_expired(expired_for=self.older_than(options), filters=filters, now=self.now))
        done = 0
        for job in jobs:
            purged = operations.job_purge(job.id, now=self.now) if self.apply else None
            done += bool(purged)
            self.item(job.id, "purge", f"{job.status}, expired {stamp(job.expires_at)} "
                      f"({ago(job.expires_at, self.now)})", purged,
                      why_not="it is still IN_PROGRESS (finish it with job_mark_failed first), or already gone")
        found = len(jobs)
        if not (filters.job_ids or filters.status or filters.code):
            for grant in selectors.grants_orphaned():
                ended = operations.grant_purge_orphan(grant.job_id) if self.apply else None
                found += 1
                done += bool(ended)
                self.item(grant.job_id, "end orphaned grant", f"pair {grant.pair}, no job row", ended,
                          why_not="its job exists again")
        self.summary(found, "expired records", done=done, verb="purged")
