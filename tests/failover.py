"""What a database failover does to one connection, or to every one, for tests of how the product reacts to it."""

import threading

import psycopg
from django.db import connection

# Every backend of the test database but the one running the statement.
_TERMINATE_OTHERS = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def terminate_every_other_backend() -> int:
    """What a PostgreSQL restart or failover does to every connection but this thread's own: how many died."""
    with connection.cursor() as cursor:
        cursor.execute(_TERMINATE_OTHERS)
        return cursor.fetchone()[0]


def terminate_every_backend() -> int:
    """The same, this thread's own connection included (the statement runs on one outside Django's pool)."""
    with unpooled_connection() as killer:
        return killer.execute(_TERMINATE_OTHERS).fetchone()[0]


def unpooled_connection() -> psycopg.Connection:
    """A psycopg connection to the test database of its own, outside Django's pool and its options."""
    params = connection.get_connection_params()
    for option in ("pool", "server_side_binding", "prepare_threshold"):
        params.pop(option, None)
    return psycopg.connect(**params)


def end_this_threads_backend() -> None:
    """Another session terminates this thread's database connection (its next statement meets a dead one)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]

    def terminate() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        connection.close()

    other = threading.Thread(target=terminate)
    other.start()
    other.join()


def meet_a_dead_connection() -> None:
    """This thread's connection is terminated, and its next statement meets it dead: the OperationalError a
    failover gives, raised here (after a commit: as if the commit's answer had been lost)."""
    end_this_threads_backend()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
