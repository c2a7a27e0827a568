"""Liveness and readiness probes of the API (no authentication).

`/readyz` depends on the database only: polling needs nothing else, and an entry point answers without a
generation handle when a queue send fails, so a broker hiccup must not take every API process out of the
load balancer. The worker's readiness, which does depend on the queues, is `manage.py worker_readiness`.
"""

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from serenity.db import retry_once_on_disconnect


def _select_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def database_reachable() -> bool:
    """True when a query reaches the database. A connection that died while idle (a restart, a failover,
    backends terminated) is not unreachability: the query is tried once more on a fresh one, and with the
    connection pool every idle connection is tested at once (serenity/db.py), so the process is not taken out
    of service for connections the pool would replace anyway."""
    try:
        retry_once_on_disconnect(_select_one)
        return True
    except Exception:
        return False


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    checks = {"database": "ok" if database_reachable() else "unreachable"}
    ready = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
