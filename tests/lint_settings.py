"""Settings of `make lint`'s migration check (django-migration-linter's `lintmigrations`, configured in
pyproject.toml): the suite's, with the linter's app, on the server's maintenance database. The check has Django write
each migration's SQL for PostgreSQL, which takes a connection but reads no table of ours: it needs no database of
its own, and `postgres` is on every server."""

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "django_migration_linter"]  # noqa: F405
DATABASES["default"]["NAME"] = "postgres"  # noqa: F405
