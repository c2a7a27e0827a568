"""`manage.py job_redrive_dlq`: the lease-aware redrive of the market-jobs dead-letter queue."""

from typing import Any

from jobs.display import stamp
from jobs.management.commands._runbook import RunbookCommand, UsageError
from jobs.services import operator


class Command(RunbookCommand):
    help = (
        "Redrive the market-jobs DLQ, lease-aware: for each message, re-send a fresh message only when its "
        "job is still IN_PROGRESS with no live lease; drop (and report) messages of finished or missing "
        "jobs; keep messages of jobs a worker holds, and of jobs whose deliveries keep dying unless named with "
        "--job. Messages that are not job messages (a scheduled task such as jobs.sweep_unsent that "
        "dead-lettered) are listed by task name and kept; --drop-other-tasks drops them too, and "
        "--only-other-tasks drops them alone, touching no job message. Run it after the cause of the dead "
        "letters is fixed (DLQ depth alarm, doctor report). Nothing redrives the DLQ automatically. Dry run "
        "unless --apply; a dry run leaves every message in place. Exit 0 only when the DLQ is left empty."
    )
    filters = ("job", "status", "code")

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument("--limit", type=int, default=1000, help="read at most this many DLQ messages")
        other = parser.add_mutually_exclusive_group()
        other.add_argument(
            "--drop-other-tasks",
            action="store_true",
            help="also drop messages that are not job messages (scheduled tasks run again on "
            "their own schedule); without it they are listed and kept",
        )
        other.add_argument(
            "--only-other-tasks",
            action="store_true",
            help="drop the messages that are not job messages and nothing else: every job "
            "message stays in the DLQ, untouched",
        )

    def run(self, options: dict[str, Any]) -> None:
        if options["limit"] < 1:
            raise UsageError("--limit must be at least 1.")
        filters = self.job_filter(options)
        if options["only_other_tasks"] and filters.narrows:
            raise UsageError(
                "--only-other-tasks selects the messages that are not job messages; it takes no "
                "--job, --status or --code."
            )
        redrive = operator.dlq_redrive(
            apply=self.apply,
            actor=self.actor,
            filters=filters,
            limit=options["limit"],
            drop_other_tasks=options["drop_other_tasks"],
            only_other_tasks=options["only_other_tasks"],
        )
        self.report_missing(filters, found=[item.message.job_id for item in redrive.items])
        actions = {operator.RESEND: "re-send", operator.DROP: "drop", operator.KEEP: "keep in DLQ"}
        done = 0
        for item in redrive.items:
            done += bool(item.done) and item.verdict != operator.KEEP
            message = item.message
            self.item(
                message.label,
                actions[item.verdict],
                f"{item.reason}; sent {stamp(message.sent_at)}, received {message.receive_count} times "
                f"(operators' reads included)",
                None if item.verdict == operator.KEEP else item.done,
                why_not="the job changed since it was read, or the send failed; the message stays",
            )
            if item.warning:
                self.stdout.write(f"{message.label}  WARNING  {item.warning}")
        to_act = sum(item.verdict != operator.KEEP for item in redrive.items)
        self.summary(to_act, "DLQ messages to re-send or drop", done=done, verb="handled")
        if redrive.left_in_dlq:
            self.needs_attention = True
            why = [
                f"{count} {text}"
                for count, text in (
                    (redrive.kept, "kept (see the 'keep in DLQ' and skipped lines)"),
                    (redrive.not_selected, f"not selected: {redrive.not_selected_why}"),
                    (redrive.unread, "held by another reader, not read (run it again in a minute)"),
                )
                if count
            ]
            self.stdout.write(f"{redrive.left_in_dlq} message(s) left in the DLQ: {'; '.join(why)}.")
