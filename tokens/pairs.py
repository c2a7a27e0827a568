"""IMS client pairs and the `x-promise-audience` header that picks one."""

from dataclasses import dataclass, field

from django.conf import settings

DEFAULT = "default"
SEMRUSH = "semrush"


class UnknownAudience(ValueError):
    """The `x-promise-audience` header names no pair we know."""


@dataclass(frozen=True)
class ClientPair:
    name: str
    emitter_client_id: str
    emitter_client_secret: str = field(repr=False)
    emitter_definition_id: str = ""
    consumer_client_id: str = ""
    consumer_client_secret: str = field(repr=False, default="")


def get_pair(name: str) -> ClientPair:
    return ClientPair(name=name, **settings.IMS_CLIENT_PAIRS[name])


def pair_from_audience(header: str | None) -> ClientPair:
    """Absent or empty header -> the default pair; `semrush` (trimmed, any case) -> the Semrush pair; else raise."""
    if header is None or not header.strip():
        return get_pair(DEFAULT)
    if header.strip().lower() == SEMRUSH:
        return get_pair(SEMRUSH)
    raise UnknownAudience("x-promise-audience must be `semrush` or absent")
