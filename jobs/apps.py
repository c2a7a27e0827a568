"""Jobs: the async job table, its one state machine, leases, the producer, the runner and runbooks."""
from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self):
        from jobs import worker  # noqa: F401  (connects the worker's Celery signals)
