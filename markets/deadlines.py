"""How an entry point spends its time: the deadline by which it must answer, and markets provisioned side by
side under it. Shared by onboarding and regeneration."""

import contextvars
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection


def request_deadline() -> float:
    """The `time.monotonic()` by which an entry point must have answered (REQUEST_DEADLINE_SECONDS)."""
    return time.monotonic() + settings.REQUEST_DEADLINE_SECONDS


def in_parallel(fn, items: list, *, limit: int) -> list:
    """`[fn(item) for item in items]`, in order, up to `limit` at a time on threads of their own.

    Each call runs in a copy of the caller's context (its request id stays on the log lines) and closes its
    database connection when done. Inside a transaction the calls run one by one on this thread instead: a
    thread of its own could not see the transaction's uncommitted rows. An exception propagates as it would
    from the loop, once the calls already started have ended.
    """
    if limit <= 1 or len(items) <= 1 or connection.in_atomic_block:
        return [fn(item) for item in items]

    def run(item, context):
        try:
            return context.run(fn, item)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=min(limit, len(items)), thread_name_prefix="provision") as pool:
        return list(pool.map(run, items, [contextvars.copy_context() for _ in items]))
