"""Switches that make the IMS simulator misbehave on purpose; stored in the database, so they reach
every process that serves or calls it."""
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from serenity.sandbox.ims.models import PromiseRecord, PromiseState, Switch


def _arm(name: str, count: int, status: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError("count must be a non-negative integer")
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError("status must be an HTTP error status (400-599)")
    Switch.objects.update_or_create(
        name=name, defaults={"remaining": count, "status": status, "updated_at": timezone.now()}
    )


def fail_next_exchanges(count: int = 1, status: int = 401) -> None:
    """The next `count` exchanges answer `status`, whatever token they carry (the token stays as it was)."""
    _arm(Switch.EXCHANGE, count, status)


def fail_next_mints(count: int = 1, status: int = 503) -> None:
    """The next `count` mints answer `status`. The product's client retries a 5xx mint once."""
    _arm(Switch.MINT, count, status)


def expire_live_tokens() -> int:
    """Every live promise token expires now; returns how many. Their next exchange answers 401."""
    past = timezone.now() - timedelta(seconds=1)
    return PromiseRecord.objects.filter(state=PromiseState.LIVE).update(expires_at=past)


def reset() -> None:
    """Disarm every switch. The ledger and tokens stay (see ledger.clear)."""
    Switch.objects.all().delete()


def state() -> dict:
    """Armed switches: `{"mint": {"remaining", "status"}, "exchange": {...}}` (absent when disarmed)."""
    return {
        s.name: {"remaining": s.remaining, "status": s.status}
        for s in Switch.objects.filter(remaining__gt=0).order_by("name")
    }


def take(name: str) -> int | None:
    """Consume one forced failure of `name`: the status to answer, or None when the switch is not armed.

    The row lock makes concurrent calls (API threads, worker processes) each consume a distinct one.
    """
    with transaction.atomic():
        switch = Switch.objects.select_for_update().filter(name=name, remaining__gt=0).first()
        if switch is None:
            return None
        switch.remaining -= 1
        switch.updated_at = timezone.now()
        switch.save(update_fields=["remaining", "updated_at"])
        return switch.status
