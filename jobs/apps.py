"""Jobs: the async job table, its one state machine, leases, the producer, the runner and runbooks. The worker's
runtime around deliveries is installed on the Celery app (jobs/worker/)."""

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
