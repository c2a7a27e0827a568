"""`manage.py job_mark_failed`: end IN_PROGRESS jobs as FAILED with a code and a reason."""

from typing import Any

from django.core.management.base import CommandParser

from jobs import services as job_services
from jobs.codes import ERROR_CODE, OPERATOR_FAILED
from jobs.display import ago
from jobs.management.commands._runbook import RunbookCommand, UsageError, parse_job_id
from jobs.models import AsyncJob, JobStatus, LeaseState


class Command(RunbookCommand):
    help = (
        "Mark IN_PROGRESS jobs FAILED with an error code and a reason: their promise token is invalidated at "
        "IMS and their grant deleted, and the UI shows them failed. Run it when a job cannot finish and "
        "should not be retried (e.g. the market was removed, or it keeps crashing the worker). A worker "
        "still holding the lease stops at its next fenced write. Only IN_PROGRESS jobs; a job already "
        "finished is left as it is (so a second run exits 0), a job that does not exist exits 1. Dry run "
        "unless --apply."
    )
    filters = ()

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--job",
            action="append",
            default=[],
            metavar="JOB_ID",
            required=True,
            help="the job to fail (repeat for several)",
        )
        parser.add_argument(
            "--code", default=OPERATOR_FAILED, help=f"the error code to record (default {OPERATOR_FAILED})"
        )
        parser.add_argument("--reason", required=True, help="a short reason, shown to operators and in the UI's error")

    def run(self, options: dict[str, Any]) -> None:
        code, reason = options["code"], (options["reason"] or "").strip()
        if not ERROR_CODE.match(code or ""):
            raise UsageError(f"--code must be an error code like OPERATOR_FAILED, got {code!r}.")
        if not reason:
            raise UsageError("--reason must say why the job is failed.")
        if len(reason) > 300:
            raise UsageError("--reason must be at most 300 characters.")
        ids = list(dict.fromkeys(parse_job_id(j) for j in options["job"]))
        jobs = {j.id: j for j in AsyncJob.objects.filter(id__in=ids)}
        found = done = 0
        for job_id in ids:
            job = jobs.get(job_id)
            if job is None:
                self.needs_attention = True  # the operator named a job that does not exist
                self.missing += 1
                self.stdout.write(f"job {job_id}  not found (purged after expiry, or never created)")
                continue
            if job.status != JobStatus.IN_PROGRESS:
                # Already finished (a second run, or it ended meanwhile): it will not run again, nothing to do.
                ended = f"{job.status} {job.error_code or ''}".rstrip()
                self.stdout.write(f"{job_id}  already finished  {ended}: nothing to do")
                continue
            found += 1
            moved = (
                job_services.job_mark_failed(job.id, code=code, reason=reason, actor=self.actor) if self.apply else None
            )
            done += bool(moved)
            lease = job.lease_state(self.now)
            self.item(
                job.id,
                f"mark FAILED {code}",
                f"phase {job.phase}, lease {lease}, updated {ago(job.updated_at, self.now)}"
                + ("; its worker stops at its next fenced write" if lease == LeaseState.HELD else ""),
                moved,
                why_not="it finished meanwhile",
            )
        self.summary(found, "IN_PROGRESS jobs to fail", done=done, verb="marked FAILED")
