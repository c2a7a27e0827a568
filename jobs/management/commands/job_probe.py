"""`manage.py job_probe`: run the stuck-jobs probe once and print what it emitted."""
from django.core.management.base import BaseCommand, CommandError

from jobs.probe import run_probe


class Command(BaseCommand):
    help = (
        "Emit the probe's StuckInProgressJobs and NeedsReauthBacklog metrics now (one EMF line on stdout) "
        "and print the counts. Celery beat runs it every few minutes. Run it by hand to check an alarm "
        "or after fixing stuck jobs. Read-only: it never changes a job. Fails, emitting nothing, when the "
        "database cannot be read."
    )

    def handle(self, *args, **options):
        values = run_probe()
        if values is None:
            raise CommandError("The probe could not read the job table; nothing was emitted (see the log).")
        for name, value in values.items():
            self.stdout.write(f"{name}  {value}")
