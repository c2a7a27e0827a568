"""Django's PostgreSQL backend, with a connection taken from the pool tested before the request uses it.

After a failover or restart, or once the database terminated its backends, every idle connection in a
process's pool is dead, and the pool does not know until one is used: the request that draws it fails
(an API 500, a delivery whose message then waits a whole visibility timeout). Here each checkout first
runs an empty statement on the connection (one round trip; docs/benchmarks.md gives its cost). A dead
one is given back (the pool discards it), every other idle connection is tested at once (`pool.check()`,
their replacements opened in the background), and one connection is drawn again. Nothing of the request
has run yet, so drawing again repeats nothing.

The empty statement goes through libpq alone (`check_connection`), not through a psycopg cursor: a checkout is not
a statement of the request's work, and the cursor's machinery and its span (OpenTelemetry traces every cursor's
statement) cost ten times its round trip's CPU; a worker checks out a connection for each database phase.

Not psycopg_pool's own `check` option: after a failed check it sleeps its reconnection backoff (1, 2, 4 s…)
before drawing again, so a pool of dead connections would cost a thread seconds. DB_POOL_CHECK=false
turns the test off (the pool then hands out connections untested, as Django's backend does).
"""

import logging
from typing import Any

import psycopg
from django.conf import settings
from django.db.backends.postgresql import base
from psycopg import pq

log = logging.getLogger(__name__)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        pool = self.pool
        if not pool or not getattr(settings, "DB_POOL_CHECK", True):
            return connection
        try:
            check_connection(connection)
        except Exception:
            log.warning("the pool handed out a dead database connection; drawing a fresh one")
            pool.putconn(connection)  # broken: the pool closes it and opens a replacement
            pool.check()  # its other idle connections died with it: test them all now
            connection = super().get_new_connection(conn_params)
        return connection


def check_connection(connection: psycopg.Connection) -> None:
    """Raise OperationalError unless `connection` answers an empty statement (sent by libpq, outside any
    transaction: the pool hands out idle connections only)."""
    pgconn = connection.pgconn
    result = pgconn.exec_(b"")
    if pgconn.status != pq.ConnStatus.OK or result.status != pq.ExecStatus.EMPTY_QUERY:
        message = pgconn.error_message.decode(errors="replace").strip() or "no answer to an empty statement"
        raise psycopg.OperationalError(f"pooled connection failed its check: {message}")
