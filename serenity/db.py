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
    """Give this thread's connection back before a long wait on another service (a DRS call of up to
    DRS_TIMEOUT_SECONDS), so waiting threads hold none; the next query takes one (from the pool, or a new one
    without it). Does nothing inside a transaction."""
    if not connection.in_atomic_block:
        connection.close()


def release_pooled_connection() -> None:
    """Give this thread's connection back to the process's pool, if there is one (PostgreSQL with
    DB_POOL_MAX_SIZE > 0) and no transaction is open: called before every network call, so a thread waiting
    on IMS, Semrush, DRS or SQS holds no connection and a process needs only as many as do database work at
    once. Taking one back costs no reconnect. Without a pool the thread keeps its own (a reconnect per call
    would cost more than it saves)."""
    if connection.connection is not None and not connection.in_atomic_block and _pooled():
        connection.close()


def _pooled() -> bool:
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def retry_once_on_disconnect(write: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `write`; if the connection turns out dead, close it and run `write` once more on a fresh one.
    Only for writes that are safe to repeat (conditional UPDATEs), and never inside a transaction (the
    caller's transaction is gone with the connection: that is for the caller to handle)."""
    try:
        return write(*args, **kwargs)
    except DISCONNECTED:
        if connection.in_atomic_block:
            raise
        log.warning("database call met a dead connection; retrying once on a fresh one")
        connection.close()
        if _pooled():
            # The pool's other idle connections died with this one (a restart, a failover): test them all
            # now and have their replacements opened, rather than one by one as threads meet them.
            connection.pool.check()  # type: ignore[attr-defined]  # PostgreSQL backend with a pool only
        return write(*args, **kwargs)


def retry_write_once_on_disconnect(write: Callable[[], bool], *, first_try_landed: Callable[[], bool]) -> bool:
    """`retry_once_on_disconnect` for a conditional write that answers whether it changed anything. When the
    connection died at the first try and the retry changes nothing, the first try may have committed with only
    its answer lost: `first_try_landed()`, read on the fresh connection, says whether it did."""
    tries = 0

    def counted() -> bool:
        nonlocal tries
        tries += 1
        return write()

    if retry_once_on_disconnect(counted):
        return True
    return tries > 1 and first_try_landed()
