"""A delivery never starts on a database connection the database dropped while the worker sat idle: around
every task, connections that are unusable or past their age (CONN_MAX_AGE) are closed, as Django does around
every request."""

from typing import Any

from celery import bootsteps, signals
from django.db import close_old_connections


def _fresh_connections(**kwargs: object) -> None:
    close_old_connections()


class FreshConnections(bootsteps.Step):
    """The worker bootstep that closes old connections before and after every task."""

    label = "fresh database connections"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        # Connected once per process however many workers it builds (the suite builds several).
        signals.task_prerun.connect(_fresh_connections, dispatch_uid="jobs.worker.connections.before")
        signals.task_postrun.connect(_fresh_connections, dispatch_uid="jobs.worker.connections.after")
