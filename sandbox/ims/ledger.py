"""The IMS simulator's ledger of promise-token events, and the read helpers tests assert on.

Every event names a token by its fingerprint (a SHA-256 prefix), never by its value.
"""

import hashlib
import logging

from sandbox.ims.models import EventKind, LedgerEvent, PromiseRecord, PromiseState

log = logging.getLogger("sandbox.ims")

MINTED = EventKind.MINTED.value
EXCHANGED = EventKind.EXCHANGED.value
ROTATED_TO = EventKind.ROTATED_TO.value
INVALIDATED = EventKind.INVALIDATED.value
REFUSED = EventKind.REFUSED.value
ANSWER_LOST = EventKind.ANSWER_LOST.value

FINGERPRINT_LENGTH = 16


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def fingerprint(token: str) -> str:
    """The ledger's name for a token value: the first 16 hex digits of its SHA-256."""
    return digest(token)[:FINGERPRINT_LENGTH]


def _kind(kind: str) -> str:
    # "rotated-to" and "rotated_to" name the same event.
    return kind.replace("-", "_")


def record(
    kind: str,
    *,
    operation: str,
    fingerprint: str = "",
    replaces: str = "",
    pair: str = "",
    user_id: str = "",
    status: int | None = None,
    reason: str = "",
) -> LedgerEvent:
    """Append one event (and log it, fingerprints only)."""
    event = LedgerEvent.objects.create(
        kind=_kind(kind),
        operation=operation,
        fingerprint=fingerprint[:FINGERPRINT_LENGTH],
        replaces=replaces[:FINGERPRINT_LENGTH],
        pair=pair,
        user_id=user_id,
        status=status,
        reason=reason,
    )
    log.info(
        "ims sandbox: promise token %s",
        event.kind,
        extra={
            "operation": operation,
            "fingerprint": event.fingerprint or None,
            "pair": pair or None,
            "status": status,
            "reason": reason or None,
        },
    )
    return event


def as_dict(event: LedgerEvent) -> dict:
    return {
        "kind": event.kind,
        "operation": event.operation,
        "fingerprint": event.fingerprint,
        "replaces": event.replaces,
        "pair": event.pair,
        "user_id": event.user_id,
        "status": event.status,
        "reason": event.reason,
        "at": event.at,
    }


def events(kind: str | None = None, *, fingerprint: str | None = None) -> list[dict]:
    """Every event, oldest first, optionally only one kind and/or one token's fingerprint."""
    queryset = LedgerEvent.objects.order_by("id")
    if kind is not None:
        queryset = queryset.filter(kind=_kind(kind))
    if fingerprint is not None:
        queryset = queryset.filter(fingerprint=fingerprint)
    return [as_dict(e) for e in queryset]


def count(kind: str) -> int:
    return LedgerEvent.objects.filter(kind=_kind(kind)).count()


def live_tokens() -> int:
    """Promise tokens minted or rotated-to and not yet exchanged or invalidated (expiry not considered)."""
    return PromiseRecord.objects.filter(state=PromiseState.LIVE).count()


def clear() -> None:
    """Forget every event and token (the signing key and switches stay)."""
    LedgerEvent.objects.all().delete()
    PromiseRecord.objects.all().delete()
