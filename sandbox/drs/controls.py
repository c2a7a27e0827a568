"""Switches that make the DRS simulator misbehave on purpose, per brand or for every brand, optionally for
only the next N calls. Also reachable over HTTP at POST /sandbox/drs/_control (see docs/simulators/drs.md)."""

from django.db import transaction
from django.db.models import F, Q

from sandbox.drs.models import DrsCall, DrsConcurrency, DrsSwitch, SwitchKind

OUTCOMES = tuple(k.value for k in SwitchKind if k != SwitchKind.LATENCY)


def set_switch(kind: str, *, brand: str | None = None, remaining: int | None = None) -> DrsSwitch:
    """Answer with `kind` (one of OUTCOMES) for `brand` (None: every brand), for the next `remaining` calls
    (None: until cleared). Replaces that scope's previous outcome switch."""
    if kind not in OUTCOMES:
        raise ValueError(f"unknown switch {kind!r}; one of {', '.join(OUTCOMES)}")
    return _put(kind, brand=brand, remaining=remaining, latency_ms=0)


def set_latency(latency_ms: int, *, brand: str | None = None, remaining: int | None = None) -> DrsSwitch:
    """Delay answers by `latency_ms` for `brand` (None: every brand); combines with an outcome switch."""
    if latency_ms < 0:
        raise ValueError("latency_ms must not be negative")
    return _put(SwitchKind.LATENCY, brand=brand, remaining=remaining, latency_ms=latency_ms)


def _put(kind: str, *, brand, remaining, latency_ms) -> DrsSwitch:
    if remaining is not None and remaining < 1:
        raise ValueError("remaining must be at least 1 (or None for until cleared)")
    switch = DrsSwitch(brand=brand or "", kind=kind, remaining=remaining, latency_ms=latency_ms)
    with transaction.atomic():
        DrsSwitch.objects.filter(brand=switch.brand, slot=_slot(kind)).delete()
        switch.save()
    return switch


def _slot(kind: str) -> str:
    return DrsSwitch.SLOT_LATENCY if kind == SwitchKind.LATENCY else DrsSwitch.SLOT_OUTCOME


def clear(brand: str | None = None) -> int:
    """Remove the switches of `brand` (its own only), or every switch when None. Returns how many."""
    qs = DrsSwitch.objects.all() if brand is None else DrsSwitch.objects.filter(brand=brand)
    return qs.delete()[0]


def reset() -> None:
    """Every switch, the concurrency limit and the whole call ledger gone: the simulator behaves normally again."""
    DrsSwitch.objects.all().delete()
    DrsCall.objects.all().delete()
    DrsConcurrency.objects.all().delete()


def set_concurrency_limit(limit: int | None) -> None:
    """Answer Lambda's throttling error to an invocation that would make more than `limit` run at once (None:
    no limit). Invocations already in flight keep counting."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError("concurrency must be a non-negative integer (or null for no limit)")
    DrsConcurrency.objects.update_or_create(id=1, defaults={"limit": limit})


def concurrency() -> dict:
    row = DrsConcurrency.objects.filter(id=1).first()
    return {"limit": row.limit if row else None, "inFlight": row.in_flight if row else 0}


def enter() -> tuple[bool, bool]:
    """(admitted, counted) for one invocation: counted in flight unless that would pass the limit (not
    admitted: throttle it). One conditional UPDATE, so concurrent invocations never both take the last place.
    Without a concurrency row (no limit was ever set) it is admitted uncounted."""
    counted = (
        DrsConcurrency.objects.filter(id=1)
        .filter(Q(limit__isnull=True) | Q(in_flight__lt=F("limit")))
        .update(in_flight=F("in_flight") + 1)
    ) == 1
    if counted:
        return True, True
    return not DrsConcurrency.objects.filter(id=1).exists(), False


def leave() -> None:
    """The invocation `enter` counted has answered."""
    DrsConcurrency.objects.filter(id=1, in_flight__gt=0).update(in_flight=F("in_flight") - 1)


def switches() -> list[dict]:
    return [
        {"brand": s.brand or None, "switch": s.kind, "latencyMs": s.latency_ms, "remaining": s.remaining}
        for s in DrsSwitch.objects.order_by("brand", "slot")
    ]


def take(brand: str) -> tuple[str | None, int]:
    """The outcome switch and latency that apply to one call for `brand`, each consuming one of its
    remaining uses. Returns (outcome kind or None, latency in ms)."""
    outcome, latency_ms = None, 0
    with transaction.atomic():
        for slot in (DrsSwitch.SLOT_OUTCOME, DrsSwitch.SLOT_LATENCY):
            switch = _applicable(slot, brand)
            if switch is None:
                continue
            if slot == DrsSwitch.SLOT_OUTCOME:
                outcome = switch.kind
            else:
                latency_ms = switch.latency_ms
            if switch.remaining is None:
                continue
            if switch.remaining <= 1:
                switch.delete()
            else:
                DrsSwitch.objects.filter(pk=switch.pk).update(remaining=F("remaining") - 1)
    return outcome, latency_ms


def _applicable(slot: str, brand: str) -> DrsSwitch | None:
    # Locked so two concurrent calls never both use a switch's last remaining use.
    candidates = DrsSwitch.objects.select_for_update().filter(slot=slot)
    if brand:
        own = candidates.filter(brand=brand).first()
        if own is not None:
            return own
    return candidates.filter(brand="").first()
