"""Switches that make the IMS simulator misbehave on purpose; stored in the database, so they reach
every process that serves or calls it."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from sandbox.ims.models import PromiseRecord, PromiseState, Switch


def _arm(name: str, count: int, status: int, *, mode: str = Switch.REFUSE, stall_seconds: float = 0) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError("count must be a non-negative integer")
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError("status must be an HTTP error status (400-599)")
    if isinstance(stall_seconds, bool) or not isinstance(stall_seconds, (int, float)) or not 0 <= stall_seconds <= 120:
        raise ValueError("stallSeconds must be a number of seconds between 0 and 120")
    Switch.objects.update_or_create(
        name=name,
        defaults={
            "remaining": count,
            "status": status,
            "mode": mode,
            "stall_seconds": stall_seconds,
            "updated_at": timezone.now(),
        },
    )


def fail_next_exchanges(count: int = 1, status: int = 401) -> None:
    """The next `count` exchanges answer `status`, whatever token they carry (the token stays as it was)."""
    _arm(Switch.EXCHANGE, count, status)


def fail_next_mints(count: int = 1, status: int = 503) -> None:
    """The next `count` mints answer `status` without minting."""
    _arm(Switch.MINT, count, status)


def lose_next_exchange_answers(count: int = 1, status: int = 500, stall_seconds: float = 0) -> None:
    """The next `count` exchanges rotate the token and commit, then lose the answer: they answer `status`,
    or, with `stall_seconds`, hold the real answer that long (past the caller's timeout)."""
    _arm(Switch.EXCHANGE, count, status, mode=Switch.LOSE, stall_seconds=stall_seconds)


def lose_next_mint_answers(count: int = 1, status: int = 500, stall_seconds: float = 0) -> None:
    """The next `count` mints mint a live token and commit, then lose the answer (as above)."""
    _arm(Switch.MINT, count, status, mode=Switch.LOSE, stall_seconds=stall_seconds)


def set_latency(ms: object) -> None:
    """Every IMS call (mint, exchange, validate, invalidate) waits `ms` milliseconds first; 0 turns it off."""
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= 120_000:
        raise ValueError("ms must be an integer between 0 and 120000")
    Switch.objects.update_or_create(name=Switch.LATENCY, defaults={"delay_ms": ms, "updated_at": timezone.now()})


def latency_ms() -> int:
    return Switch.objects.filter(name=Switch.LATENCY).values_list("delay_ms", flat=True).first() or 0


def expire_live_tokens() -> int:
    """Every live promise token expires now; returns how many. Their next exchange answers 401."""
    past = timezone.now() - timedelta(seconds=1)
    return PromiseRecord.objects.filter(state=PromiseState.LIVE).update(expires_at=past)


def reset() -> None:
    """Disarm every switch, latency included. The ledger and tokens stay (see ledger.clear)."""
    Switch.objects.all().delete()


def state() -> dict:
    """Armed switches: `{"mint": {"remaining", "status"}, "exchange": {...}}` (absent when disarmed), with
    `mode` and `stallSeconds` for a switch that loses answers, and `latencyMs` when a latency is set."""
    out: dict[str, Any] = {}
    for s in Switch.objects.filter(remaining__gt=0).exclude(name=Switch.LATENCY).order_by("name"):
        out[s.name] = {"remaining": s.remaining, "status": s.status}
        if s.mode == Switch.LOSE:
            out[s.name].update(mode=s.mode, stallSeconds=s.stall_seconds)
    if latency := latency_ms():
        out["latencyMs"] = latency
    return out


@dataclass(frozen=True)
class Forced:
    """One forced failure taken from a switch."""

    status: int
    mode: str
    stall_seconds: float

    @property
    def loses_answer(self) -> bool:
        return self.mode == Switch.LOSE


def take(name: str) -> Forced | None:
    """Consume one forced failure of `name`, or None when the switch is not armed.

    The conditional decrement makes concurrent calls (API threads, worker processes) each consume a
    distinct one.
    """
    while True:
        switch = Switch.objects.filter(name=name, remaining__gt=0).first()
        if switch is None:
            return None
        taken = Switch.objects.filter(pk=switch.pk, remaining=switch.remaining).update(
            remaining=switch.remaining - 1, updated_at=timezone.now()
        )
        if taken:
            return Forced(status=switch.status, mode=switch.mode, stall_seconds=switch.stall_seconds)
