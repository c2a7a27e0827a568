"""What a database failover does to one connection, for tests of how the product reacts to it."""

import threading

from django.db import connection


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
