"""The DRS simulator's call ledger: what it received, for tests and for a look from the admin."""

from sandbox.drs.models import DrsCall


def record(*, brand: str, function: str, body: dict, outcome: str) -> DrsCall:
    return DrsCall.objects.create(brand=brand or "", function=function or "", body=body, outcome=outcome)


def _ledger(brand: str | None):
    qs = DrsCall.objects.order_by("id")
    return qs if brand is None else qs.filter(brand=brand)


def calls(brand: str | None = None) -> list[dict]:
    """The request bodies received (for `brand`, or all), oldest first."""
    return [c.body for c in _ledger(brand)]


def call_count(brand: str | None = None) -> int:
    return _ledger(brand).count()


def call_records(brand: str | None = None) -> list[dict]:
    """Each call with what the simulator knew of it: when, which function was targeted, what it answered."""
    return [
        {
            "receivedAt": c.received_at.isoformat(),
            "brand": c.brand,
            "function": c.function,
            "outcome": c.outcome,
            "body": c.body,
        }
        for c in _ledger(brand)
    ]
