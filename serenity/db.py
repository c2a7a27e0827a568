"""Surviving a database that went away while this thread waited on something else (a restart, a failover,
an idle connection dropped during a DRS call of minutes): find out before writing, and retry the one write
that met a dead connection, once, on a fresh one."""
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

DISCONNECTED = (OperationalError, InterfaceError)

P = ParamSpec("P")
R = TypeVar("R")


def release_connection() -> None:
    """Give this thread's connection back before a long wait on another service (a DRS call of up to 300 s),
    so waiting threads hold none; the next query opens one. Does nothing inside a transaction."""
    if not connection.in_atomic_block:
        connection.close()


def retry_once_on_disconnect(write: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `write`; if the connection turns out dead, close it and run `write` once more on a fresh one.
    Only for writes that are safe to repeat (conditional UPDATEs), and never inside a transaction (the
    caller's transaction is gone with the connection: that is for the caller to handle)."""
    try:
        return write(*args, **kwargs)
    except DISCONNECTED:
        if connection.in_atomic_block:
            raise
        log.warning("database write met a dead connection; retrying once on a fresh one")
        connection.close()
        return write(*args, **kwargs)
