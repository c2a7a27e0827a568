"""The rule every client obeys: no network call while this thread holds a database transaction open.

A transaction held across a call keeps row locks (PostgreSQL) or the whole database's write lock (SQLite,
where the simulators serving the call need that same lock) for as long as the other side takes to answer.
Every client calls `outside_transaction()` before it sends anything. Local runs and the test suite raise,
so a violation fails loudly; deployments log an error and carry on (NETWORK_CALL_IN_TRANSACTION).
"""

import logging

from django.conf import settings
from django.db import connections

from serenity.db import release_pooled_connection

log = logging.getLogger(__name__)


class NetworkCallInTransaction(RuntimeError):
    """A client was called while a database transaction was open in this thread."""


def open_transaction_aliases() -> list[str]:
    """Aliases of the databases on which this thread is inside `atomic()`, ignoring the wrapping
    transaction a test case opens around each test (pytest-django's `db` fixture)."""
    aliases = []
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block and any(not getattr(block, "_from_testcase", False) for block in conn.atomic_blocks):
            aliases.append(conn.alias)
    return aliases


def outside_transaction(what: str) -> None:
    """Call right before a network call. Raises NetworkCallInTransaction (or logs, per settings). Outside a
    transaction, the thread's pooled database connection goes back to the pool for the call's duration."""
    aliases = open_transaction_aliases()
    if not aliases:
        release_pooled_connection()
        return
    message = f"{what}: network call inside a database transaction ({', '.join(aliases)})"
    if getattr(settings, "NETWORK_CALL_IN_TRANSACTION", "raise") == "raise":
        raise NetworkCallInTransaction(message)
    log.error("network call inside a database transaction", extra={"call": what})


def require_no_transaction(what: str) -> None:
    """A unit of work that commits by itself and then calls out (enqueue, re-authorise) refuses to start
    inside a caller's transaction, in every environment: its message would leave before its rows commit.
    Raises NetworkCallInTransaction."""
    aliases = open_transaction_aliases()
    if aliases:
        raise NetworkCallInTransaction(f"{what}: must not run inside a database transaction ({', '.join(aliases)})")


def guard_boto3_client(client, service: str):
    """Make a boto3 client check the rule before every request it sends; returns the client."""

    def check(event_name: str = "", **kwargs) -> None:  # returning None lets botocore send as usual
        outside_transaction(event_name.removeprefix("before-send.") or service)

    client.meta.events.register("before-send", check)
    return client
