"""Jobs: the async job table, its one state machine, leases, the producer, the runner and runbooks."""

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        from jobs.worker import stop  # noqa: F401  (connects the worker's Celery signals)
        from jobs.worker.heartbeats import WorkerHeartbeatStep
        from jobs.worker.intake import BudgetIntakeStep
        from serenity.celery import app

        # Every worker process keeps a heartbeat row while its consumer runs (WorkersAlive, no_consumer).
        app.steps["consumer"].add(WorkerHeartbeatStep)
        # Its receives ask for no more job messages than the fleet's DRS budget has places for
        # (jobs/worker/intake.py).
        app.steps["consumer"].add(BudgetIntakeStep)
