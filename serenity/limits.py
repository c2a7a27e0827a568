"""Request limits: per user and per organization, counted atomically in the database across every API process.

A limit is charged only once the caller is authenticated *and* may act on what it names: the views of the entry
points and of regeneration call `charge_entry_point` after their scoping, and re-authorisation's service calls
`charge_user` / `charge_org` once the job was read through the scoping rule; so a stranger can never spend an
organization's budget. Each check is one conditional upsert (GCRA, the generic cell rate algorithm): a key keeps
the time its budget is spent up to (`tat`); a charge of `weight` moves it `weight x period/limit` later, and is
refused whole, changing nothing, when that would run more than `period` ahead of now. Concurrent charges
serialise on the row, so N concurrent requests against a budget of L get exactly max(0, N - L) refusals; the
budget refills continuously.

Rates are settings (THROTTLE_*_RATE, `N/sec|min|hour|day`); THROTTLE_OVERRIDES raises or lowers one for a tenant
(`org_markets:<organization id>=5000/hour`), and `manage.py limits_reset` gives a tenant its budget back
(docs/operations.md "Limits").
"""

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from serenity.problems import DomainError

# Scopes: what is counted, and whose budget it is.
ONBOARDING = "onboarding"  # entry-point calls (create brand, create market, activate, regenerate) per user
REAUTH = "reauth"  # re-authorisations per user: each winning one mints at IMS
ORG_MARKETS = "org_markets"  # markets asked for per organization (an activation of 50 counts 50)
ORG_REAUTH = "org_reauth"  # re-authorisations per organization

PERIODS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}
TABLE = "serenity_rate_limit"

_UPSERT = """
INSERT INTO {table} (key, tat) VALUES (%(key)s, %(now)s + %(increment)s)
ON CONFLICT (key) DO UPDATE SET tat = {greatest}({table}.tat, %(now)s) + %(increment)s
WHERE {greatest}({table}.tat, %(now)s) + %(increment)s - %(now)s <= %(period)s
RETURNING tat
"""
# PostgreSQL's GREATEST and SQLite's two-argument MAX are the same function.
SQL = {
    vendor: _UPSERT.format(table=TABLE, greatest=greatest)
    for vendor, greatest in (("postgresql", "GREATEST"), ("sqlite", "MAX"))
}


class Throttled(DomainError):
    status, code, title = 429, "throttled", "Too many requests"

    def __init__(self, retry_after: int):
        super().__init__(
            f"Request was throttled. Expected available in {retry_after} seconds.",
            headers={"Retry-After": str(retry_after)},
        )
        self.retry_after = retry_after


@dataclass(frozen=True)
class Rate:
    limit: int
    period: int

    @classmethod
    def parse(cls, text: str) -> "Rate":
        """`60/min`, `500/hour`, `10/day`. Raises ValueError."""
        count, _, unit = str(text).strip().partition("/")
        limit, period = int(count), PERIODS[unit.strip().lower()]
        if limit <= 0:
            raise ValueError("a rate's count must be positive")
        return cls(limit=limit, period=period)


def rate_for(scope: str, ident: str) -> Rate | None:
    """The rate of `scope` for one tenant (an override when THROTTLE_OVERRIDES names it); None: unlimited."""
    override = settings.THROTTLE_OVERRIDES.get(f"{scope}:{ident}")
    text = override or settings.THROTTLE_RATES.get(scope)
    return Rate.parse(text) if text else None


def _key(scope: str, ident: str) -> str:
    # A user's id never sits in the table in clear; an organization's id is no secret.
    return f"{scope}:{hashlib.sha256(ident.encode()).hexdigest()[:32]}"


def charge(scope: str, ident: str, *, weight: int = 1) -> None:
    """Spend `weight` of `ident`'s budget in `scope`, or raise Throttled (429 with Retry-After) and spend
    nothing. A weight the budget could never hold (more than its whole limit) is refused too."""
    rate = rate_for(scope, ident)
    if rate is None or weight <= 0:
        return
    interval = rate.period / rate.limit
    if weight > rate.limit:
        raise Throttled(retry_after=rate.period)
    params: dict[str, Any] = {
        "key": _key(scope, ident),
        "now": time.time(),
        "increment": weight * interval,
        "period": rate.period,
    }
    with connection.cursor() as cursor:
        cursor.execute(SQL[connection.vendor], params)
        if cursor.fetchone() is not None:
            return
        cursor.execute(f"SELECT tat FROM {TABLE} WHERE key = %(key)s", params)  # noqa: S608 (a constant table)
        row = cursor.fetchone()
    tat = row[0] if row else params["now"]
    wait = max(tat, params["now"]) + params["increment"] - rate.period - params["now"]
    raise Throttled(retry_after=max(1, math.ceil(wait)))


def charge_user(scope: str, caller, *, weight: int = 1) -> None:
    """A user's budget, by the stable user id (`user_id`, or a session token's `sub`)."""
    charge(scope, caller.user_id, weight=weight)


def charge_org(scope: str, organization_id, *, weight: int = 1) -> None:
    charge(scope, str(organization_id), weight=weight)


def charge_entry_point(caller, organization_id, *, markets: int) -> None:
    """An entry point's limits (create brand, create market, activate, regenerate): one call of the user's, and
    the markets asked for of the organization's. Raises Throttled."""
    charge_user(ONBOARDING, caller)
    charge_org(ORG_MARKETS, organization_id, weight=markets)


@dataclass(frozen=True)
class Budget:
    scope: str
    rate: Rate
    spent: float  # of rate.limit, refilling continuously


def budgets(ident: str) -> list[Budget]:
    """`ident`'s budgets that are partly spent now, in every scope (a user's id or an organization's id)."""
    now, out = time.time(), []
    with connection.cursor() as cursor:
        for scope in settings.THROTTLE_RATES:
            rate = rate_for(scope, ident)
            cursor.execute(f"SELECT tat FROM {TABLE} WHERE key = %s", [_key(scope, ident)])  # noqa: S608
            row = cursor.fetchone()
            if rate is not None and row is not None and row[0] > now:
                out.append(Budget(scope=scope, rate=rate, spent=(row[0] - now) / (rate.period / rate.limit)))
    return out


def reset(scope: str | None, ident: str) -> int:
    """Give `ident` its whole budget back in `scope` (every scope when None). Returns how many budgets."""
    scopes = [scope] if scope else list(settings.THROTTLE_RATES)
    keys = [_key(s, ident) for s in scopes]
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE key IN ({', '.join(['%s'] * len(keys))})", keys)  # noqa: S608
        return cursor.rowcount
