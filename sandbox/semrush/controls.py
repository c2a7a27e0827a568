"""Switches of the Semrush simulator, for tests and local runs: latency, a rate limit per client pair, injected
failures, catalogues, reset.

They live in the database, so a test thread, the live server's threads and a separate `make run`
process all see the same switches. `POST /sandbox/semrush/_control` calls these same functions.
"""

import math
import os
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from sandbox.semrush import catalogue
from sandbox.semrush.models import (
    Call,
    CatalogueOverride,
    FailureRule,
    IdempotentResponse,
    RateHit,
    Switchboard,
    Workspace,
)

# 404 and 405: an endpoint the deployment does not serve (the catalogue routes fall back to an empty list).
FAILURE_STATUSES = (401, 403, 404, 405, 429, 500, 502, 503, 504)
# A deliberately broken Semrush, for proving that the soak notices a broken guarantee (docs/soak.md): with
# this set to true in the simulators' environment, a repeated Idempotency-Key is served again.
FORGET_IDEMPOTENCY_ENV = "SANDBOX_SEMRUSH_FORGET_IDEMPOTENCY"


def forgets_idempotency() -> bool:
    """True when the simulator is told to ignore Idempotency-Key (a broken Semrush, never the default)."""
    return os.environ.get(FORGET_IDEMPOTENCY_ENV, "").strip().lower() in ("1", "true", "yes")


def set_latency(ms: object) -> None:
    """Delay every API call by `ms` milliseconds before it is served (0 turns it off)."""
    if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
        raise ValueError("latency must be a non-negative integer of milliseconds")
    Switchboard.objects.update_or_create(id=1, defaults={"latency_ms": ms})


def latency_ms() -> int:
    board = Switchboard.objects.filter(id=1).first()
    return board.latency_ms if board else 0


def set_rate_limit(
    requests: object, *, per_seconds: object = 1, path: str | None = None, method: str | None = None
) -> None:
    """Admit at most `requests` API calls per client pair in any `per_seconds` (calls matching `path`, a
    substring, and `method`, when given); one more is answered 429 with Retry-After, the seconds until a
    place frees. `requests` None lifts the limit."""
    if requests is not None and (not isinstance(requests, int) or isinstance(requests, bool) or requests < 0):
        raise ValueError("requests must be a non-negative integer (or null for no limit)")
    if not isinstance(per_seconds, int) or isinstance(per_seconds, bool) or not 1 <= per_seconds <= 3600:
        raise ValueError("perSeconds must be an integer between 1 and 3600")
    with transaction.atomic():
        Switchboard.objects.update_or_create(
            id=1,
            defaults={
                "rate_requests": requests,
                "rate_seconds": per_seconds,
                "rate_path": path or "",
                "rate_method": (method or "").upper(),
                "rate_peak": 0,
            },
        )
        RateHit.objects.all().delete()


def rate_limit() -> dict | None:
    board = Switchboard.objects.filter(id=1, rate_requests__isnull=False).first()
    if board is None:
        return None
    return {
        "requests": board.rate_requests,
        "perSeconds": board.rate_seconds,
        "path": board.rate_path or None,
        "method": board.rate_method or None,
    }


def take_rate_slot(pair: str, method: str, path: str) -> int | None:
    """Admit one call of `pair` under the rate limit (None) or refuse it: the Retry-After, in whole seconds
    (at least 1), until the oldest admitted call of the window leaves it. The switchboard row is locked for
    the decision, so concurrent calls never both take the last place."""
    if not Switchboard.objects.filter(id=1, rate_requests__isnull=False).exists():
        return None
    with transaction.atomic():
        board = Switchboard.objects.select_for_update().filter(id=1).first()
        if board is None or board.rate_requests is None:
            return None
        if (board.rate_method and board.rate_method != method.upper()) or (
            board.rate_path and board.rate_path not in path
        ):
            return None
        now = timezone.now()
        since = now - timedelta(seconds=board.rate_seconds)
        admitted = RateHit.objects.filter(pair=pair, at__gt=since).order_by("at")
        in_window = admitted.count()
        if in_window >= board.rate_requests:
            oldest = admitted.first()
            frees_at = (oldest.at if oldest else now) + timedelta(seconds=board.rate_seconds)
            return max(1, math.ceil((frees_at - now).total_seconds()))
        RateHit.objects.filter(pair=pair, at__lte=since).delete()
        RateHit.objects.create(pair=pair, at=now)
        if in_window + 1 > board.rate_peak:
            Switchboard.objects.filter(id=1).update(rate_peak=in_window + 1)
    return None


def rate_peak() -> int:
    """The most calls of one pair the rate limit admitted within one of its windows since it was set (0 without
    a limit): how close the callers came to it, where its 429s only say whether they passed it."""
    board = Switchboard.objects.filter(id=1, rate_requests__isnull=False).first()
    return board.rate_peak if board else 0


def fail_next(
    count: int = 1,
    *,
    status: int = 503,
    path: str | None = None,
    method: str | None = None,
    retry_after: int | None = None,
    lose_answer: bool = False,
    stall_ms: int = 0,
) -> None:
    """Answer the next `count` API calls matching `path` (a substring) and `method` with `status`.

    A 429 carries `Retry-After` (default 1 s); other statuses carry it only when `retry_after` is given.
    With `lose_answer` the call is served first (a write commits) and only its answer is replaced by
    `status`: the caller cannot tell whether it happened. With `stall_ms` the call waits that long and is
    then served as usual (a caller with a shorter timeout gives up while the write still lands).
    Rules are consumed in the order they were added.
    """
    if status not in FAILURE_STATUSES:
        raise ValueError(f"status must be one of {FAILURE_STATUSES}")
    if not isinstance(count, int) or count < 1:
        raise ValueError("count must be a positive integer")
    if not isinstance(stall_ms, int) or isinstance(stall_ms, bool) or not 0 <= stall_ms <= 120_000:
        raise ValueError("stall must be an integer of milliseconds between 0 and 120000")
    if retry_after is None and status == 429:
        retry_after = 1
    FailureRule.objects.create(
        status=status,
        remaining=count,
        path_contains=path or "",
        method=(method or "").upper(),
        retry_after=retry_after,
        lose_answer=bool(lose_answer),
        stall_ms=stall_ms,
    )


def take_failure(method: str, path: str) -> FailureRule | None:
    """Consume one injected failure matching this call, if any (row-locked: concurrent calls each take
    their own)."""
    with transaction.atomic():
        for rule in FailureRule.objects.select_for_update().filter(remaining__gt=0).order_by("id"):
            if rule.method and rule.method != method.upper():
                continue
            if rule.path_contains and rule.path_contains not in path:
                continue
            rule.remaining -= 1
            rule.save(update_fields=["remaining"])
            return rule
    return None


def set_catalogue(*, domain: str, country: str, items: object) -> None:
    """Serve exactly `items` (possibly empty) as the catalogue of (domain, country)."""
    if not isinstance(items, list):
        raise ValueError("items must be a list")
    _check_slice(domain, country)
    domain, country = catalogue.normalise(domain, country)
    CatalogueOverride.objects.update_or_create(domain=domain, country=country, defaults={"items": items})


def clear_catalogue(*, domain: str, country: str) -> None:
    """Go back to the generated catalogue for (domain, country)."""
    _check_slice(domain, country)
    domain, country = catalogue.normalise(domain, country)
    CatalogueOverride.objects.filter(domain=domain, country=country).delete()


def _check_slice(domain, country) -> None:
    if not isinstance(domain, str) or not domain.strip():
        raise ValueError("domain must be a non-empty string")
    if not isinstance(country, str) or len(country.strip()) != 2 or not country.strip().isalpha():
        raise ValueError("country must be an ISO 3166-1 alpha-2 code")


def catalogue_for(domain: str, country: str) -> list[dict]:
    """The catalogue the API serves for (domain, country): the override when there is one."""
    domain, country = catalogue.normalise(domain, country)
    override = CatalogueOverride.objects.filter(domain=domain, country=country).first()
    return list(override.items) if override else catalogue.generate(domain, country)


def reset(*, data: bool = False) -> None:
    """Turn every switch off (latency, failures, catalogue overrides). With `data=True`, also forget every
    workspace, project, tag, prompt and recorded call."""
    with transaction.atomic():
        Switchboard.objects.all().delete()
        FailureRule.objects.all().delete()
        CatalogueOverride.objects.all().delete()
        RateHit.objects.all().delete()
        if data:
            IdempotentResponse.objects.all().delete()
            Workspace.objects.all().delete()
            Call.objects.all().delete()
