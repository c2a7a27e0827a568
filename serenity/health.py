"""Liveness and readiness probes (no authentication).

Apps add their own readiness checks (e.g. the job queue) with `register_readiness_check`, so this module
depends on no app.
"""
from collections.abc import Callable

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

_readiness_checks: dict[str, Callable[[], bool]] = {}


def register_readiness_check(name: str, check: Callable[[], bool]) -> None:
    _readiness_checks[name] = check


def _database_reachable() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    checks = {"database": "ok" if _database_reachable() else "unreachable"}
    for name, check in _readiness_checks.items():
        try:
            checks[name] = "ok" if check() else "unreachable"
        except Exception:
            checks[name] = "unreachable"
    ready = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
