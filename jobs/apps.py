"""Jobs: the async job table, its one state machine, leases, the producer, the runner and runbooks."""

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        from jobs import worker  # noqa: F401  (connects the worker's Celery signals)
        from jobs.heartbeats import WorkerHeartbeatStep
        from jobs.intake import BudgetIntakeStep
        from serenity.celery import app

        # Every worker process keeps a heartbeat row while its consumer runs (WorkersAlive, no_consumer).
        app.steps["consumer"].add(WorkerHeartbeatStep)
        # Its receives ask for no more job messages than the fleet's DRS budget has places for (jobs/intake.py).
        app.steps["consumer"].add(BudgetIntakeStep)
