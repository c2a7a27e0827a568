"""The table of the database cache (CACHES, `dbcache://`), created by `migrate` so no process needs an
extra `createcachetable` step. With another cache backend (CACHE_URL) it does nothing."""
from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = []

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop, elidable=False)]
