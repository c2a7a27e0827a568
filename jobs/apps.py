"""Jobs: the async job table, its one state machine, leases, the producer, the runner and runbooks."""
from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
