"""`manage.py job_redrive_dlq`: the lease-aware redrive of the market-jobs dead-letter queue."""
from jobs.display import stamp
from jobs.management.commands._runbook import RunbookCommand, UsageError
from jobs.services import operator


class Command(RunbookCommand):
    help = (
        "Redrive the market-jobs DLQ, lease-aware: for each message, re-send a fresh message only when its "
        "job is still IN_PROGRESS with no live lease; drop (and report) messages of finished or missing "
        "jobs; keep messages of jobs a worker holds. Messages that are not job messages (a scheduled task "
        "such as jobs.probe that dead-lettered) are listed by task name and kept, or dropped with "
        "--drop-other-tasks. Run it after the cause of the dead letters is fixed (DLQ depth alarm, doctor "
        "report). Nothing redrives the DLQ automatically. Dry run unless --apply; a dry run leaves every "
        "message in place."
    )
    filters = ("job", "status", "code")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--limit", type=int, default=1000, help="read at most this many DLQ messages")
        parser.add_argument("--drop-other-tasks", action="store_true",
                            help="drop messages that are not job messages (scheduled tasks run again on "
                                 "their own schedule); without it they are listed and kept")

    def run(self, options):
        if options["limit"] < 1:
            raise UsageError("--limit must be at least 1.")
        items = operator.dlq_redrive(apply=self.apply, actor=self.actor, filters=self.job_filter(options),
                                     limit=options["limit"], drop_other_tasks=options["drop_other_tasks"])
        actions = {operator.RESEND: "re-send", operator.DROP: "drop", operator.KEEP: "keep in DLQ"}
        done = 0
        for item in items:
            done += bool(item.done) and item.verdict != operator.KEEP
            message = item.message
            self.item(message.label, actions[item.verdict],
                      f"{item.reason}; sent {stamp(message.sent_at)}, received {message.receive_count} times "
                      f"(operators' reads included)",
                      None if item.verdict == operator.KEEP else item.done,
                      why_not="the job changed since it was read, or the send failed; the message stays")
        to_act = sum(item.verdict != operator.KEEP for item in items)
        kept = len(items) - to_act
        self.summary(to_act, "DLQ messages to re-send or drop", done=done, verb="handled")
        if kept:
            self.needs_attention = True
            self.stdout.write(f"{kept} message(s) left in the DLQ (see 'keep in DLQ' lines).")
