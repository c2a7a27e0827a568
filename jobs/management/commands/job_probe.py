"""`manage.py job_probe`: run the probe once and print what it emitted."""

from typing import Any

from django.core.management.base import CommandError

from jobs.management.commands._runbook import RunbookCommand
from jobs.probe import needs_a_human, run_probe


class Command(RunbookCommand):
    help = (
        "Emit the probe's metrics now (one EMF line on stdout: StuckInProgressJobs, NeedsReauthBacklog, "
        "WorkersAlive, DrsInFlight, DrsMaxInFlight, JobsWaitingForBudget, OldestBudgetWaitSeconds, DrsBudgetStalled, "
        "JobMessagesWithoutConsumer, MaintenanceQueueDepth) and print them. A job waiting for a DRS budget place or "
        "out a delay is waiting, not stuck. Celery beat runs it "
        "every minute. Run it by hand to check an alarm, or after fixing stuck jobs or restarting workers. "
        "Read-only: it never changes a job. Exit 0: nothing needs you; 1: jobs are stuck, the DRS budget is full with "
        "nothing ending, no worker is alive, "
        "a queue could not be read, or the database could not be read (then nothing is emitted)."
    )
    mutates = False
    filters = ()

    def run(self, options: dict[str, Any]) -> None:
        values = run_probe()
        if values is None:
            raise CommandError("The probe could not read the job table; nothing was emitted (see the log).")
        for name, value in values.items():
            self.stdout.write(f"{name}  {value}")
        if "JobMessagesWithoutConsumer" not in values:
            self.stdout.write(
                "JobMessagesWithoutConsumer, MaintenanceQueueDepth  not emitted: the queues could "
                "not be read (see the log)"
            )
        self.needs_attention = needs_a_human(values)
