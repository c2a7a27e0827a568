"""`manage.py job_inspect`: everything an operator needs about a job, in one read-only report."""

from typing import Any

from django.core.management.base import CommandParser
from django_stubs_ext import WithAnnotations

from jobs import display, handlers, selectors
from jobs.clients import sqs
from jobs.display import ago, stamp
from jobs.dlq import DlqMessage, DlqScan, queue_counts
from jobs.management.commands._runbook import RunbookCommand, UsageError
from jobs.models import AsyncJob, JobStatus, LeaseState


class Command(RunbookCommand):
    help = (
        "Show a job: status, error, owner, lease, checkpoints, whether its message sits in the DLQ, the "
        "queues' depth, and its history (one event a line). Run it first on any job a user, an alarm or "
        "the doctor names, before any other runbook. Read-only (the DLQ is peeked at and left as it was). "
        "Name jobs with --job, or list the newest matching --status / --code / --older-than."
    )
    mutates = False
    filters = ("job", "older_than", "status", "code")
    older_than_help = "only jobs created at least this long ago (45s, 30m, 2h, 1d)"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--limit", type=int, default=20, help="show at most this many jobs (default 20)")

    def run(self, options: dict[str, Any]) -> None:
        filters = self.job_filter(options)
        older_than = self.older_than(options)
        if not (filters.narrows or older_than):
            raise UsageError("Name a job with --job, or narrow with --status, --code or --older-than.")
        qs = selectors.jobs_filtered(filters).filter(created_at__lte=self.now - older_than)
        jobs = list(selectors.with_activity(qs).order_by("-created_at")[: max(1, options["limit"])])
        self.report_missing(filters)
        dlq, queue_line = self.queues()
        for job in jobs:
            self.show(job, dlq, queue_line)
        listed = {str(j.id) for j in jobs}
        for job_id in {str(j) for j in filters.job_ids} - listed:
            for line in self.dlq_lines(dlq, job_id):
                self.stdout.write(f"job {job_id}  {line}")
        self.last_line(f"{len(jobs)} job(s) shown.")

    def queues(self) -> tuple[dict[str, list[DlqMessage]] | None, str]:
        try:
            with DlqScan(hold_seconds=30) as scan:
                dlq = scan.by_job()
            counts = queue_counts()
        except sqs.AWSError as exc:
            return None, f"queues unavailable ({type(exc).__name__})"
        q = counts["queue"]
        line = (
            f"main queue ~{q.get('Visible', 0)} waiting, {q.get('NotVisible', 0)} in flight, "
            f"{q.get('Delayed', 0)} delayed (not searched: a receive there counts towards maxReceiveCount)"
        )
        return dlq, line

    def dlq_lines(self, dlq: dict[str, list[DlqMessage]] | None, job_id: str) -> list[str]:
        if dlq is None:
            return []
        return [
            f"in DLQ: message {m.message_id}, sent {stamp(m.sent_at)}, received {m.receive_count} times "
            f"(operators' reads included; the job's attempts say how often workers ran it)"
            for m in dlq.get(job_id, [])
        ]

    def show(
        self,
        job: "WithAnnotations[AsyncJob, selectors.Activity]",
        dlq: dict[str, list[DlqMessage]] | None,
        queue_line: str,
    ) -> None:
        now = self.now
        w = self.stdout.write
        w(f"job {job.id}  {job.job_type}  {job.status}  phase {job.phase}")
        about = handlers.describe(job)
        w(
            f"  owner        org {job.organization_id}, brand {job.brand_id}, site {job.site_id or '-'}, "
            f"user {job.user_id or '-'}" + (f"; {about}" if about else "")
        )
        if job.error:
            e = job.error
            w(
                f"  error        {e.get('code')}: {display.redacted(e.get('message'))} "
                f"(retryable {e.get('retryable')}, needsReauth {e.get('needsReauth')})"
            )
        if job.result:
            w(f"  result       {display.redacted(job.result)}")
        lease = job.lease_state(now)
        lease_line = (
            "none"
            if lease == LeaseState.NONE
            else (f"{lease}, expires {stamp(job.lease_expires_at)} ({ago(job.lease_expires_at, now)})")
        )
        w(f"  lease        {lease_line}; epoch {job.lease_epoch}")
        deliveries = selectors.deliveries(job, now=now)
        w(f"  deliveries   {display.deliveries_line(deliveries, in_progress=job.status == JobStatus.IN_PROGRESS)}")
        w(
            f"  times        created {stamp(job.created_at)} ({ago(job.created_at, now)}), last activity "
            f"{ago(job.last_activity_at, now)}, message sent {ago(job.message_sent_at, now)}, "
            f"expires {stamp(job.expires_at)}"
        )
        w(f"  checkpoints  {display.checkpoints_line(job.checkpoints)}")
        dlq_lines = self.dlq_lines(dlq, str(job.id)) or ([] if dlq is None else ["not in DLQ"])
        for line in [*dlq_lines, queue_line]:
            w(f"  queue        {line}")
        w("  history")
        for event in selectors.job_events(job.id):
            w(f"    {stamp(event.at)}  {event.kind:<20} {event.actor or '-'}  {display.redacted(event.detail)}")
