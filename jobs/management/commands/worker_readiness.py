"""`manage.py worker_readiness`: the worker's readiness probe (its container's health check)."""

import json
from typing import Any

from django.core.management.base import BaseCommand

from jobs.clients import sqs
from serenity.health import database_reachable


class Command(BaseCommand):
    help = (
        "Exit 0 when what a worker needs is reachable (the database and its queues), 1 otherwise; prints one "
        "JSON line with each check. The worker container's health check runs it; the API's /readyz does not "
        "depend on the queues (polling needs none, and an entry point answers without a handle when a send "
        "fails), so a broker hiccup never takes the API out of the load balancer."
    )

    def handle(self, *args: str, **options: Any) -> None:
        checks = {
            "database": "ok" if database_reachable() else "unreachable",
            "broker": "ok" if sqs.queues_reachable() else "unreachable",
        }
        ready = all(v == "ok" for v in checks.values())
        self.stdout.write(json.dumps({"status": "ok" if ready else "unavailable", "checks": checks}))
        if not ready:
            raise SystemExit(1)
