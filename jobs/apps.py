"""Jobs: the async job table, its one state machine, leases, the producer, the runner and runbooks."""
from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self):
        from jobs.clients.sqs import queue_reachable
        from serenity.health import register_readiness_check

        register_readiness_check("broker", queue_reachable)
