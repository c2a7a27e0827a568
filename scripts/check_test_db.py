"""Before the suite: make sure DATABASE_URL reaches a PostgreSQL server, and say how to fix it if not."""

import os
import sys
from urllib.parse import urlsplit, urlunsplit

import psycopg

url = os.environ.get("DATABASE_URL", "")
if not url.startswith(("postgres://", "postgresql://")):
    sys.exit(f"The tests run on PostgreSQL. Set TEST_DATABASE_URL=postgres://USER@HOST:PORT/DBNAME (got {url!r}).")
try:
    # The maintenance database: the suite creates its own test database next to it.
    with psycopg.connect(urlunsplit(urlsplit(url)._replace(path="/postgres")), connect_timeout=5):
        pass
except psycopg.OperationalError as exc:
    sys.exit(
        "Cannot reach PostgreSQL for the tests.\n"
        f"  tried: {url}\n  error: {str(exc).strip().splitlines()[0]}\n"
        "Start PostgreSQL locally (e.g. `pg_ctlcluster 15 main start`), or point the suite at another server:\n"
        "  make test TEST_DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/serenity\n"
        "The user needs CREATEDB: the suite creates and drops its own test_serenity database."
    )
