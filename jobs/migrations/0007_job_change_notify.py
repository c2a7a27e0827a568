"""A job whose visible state changes notifies `serenity_job_changed` with its id, from a trigger: the NOTIFY is
part of the changing transaction, so PostgreSQL delivers it at that transaction's commit and never for one that
rolled back, whichever process or statement made the change (a worker's fenced write, the producer, an operator's
command, a hand-written UPDATE). What the API's waiting polls wake on (jobs/job_changes.py). Nothing on SQLite."""

from django.db import migrations

CHANNEL = "serenity_job_changed"

CREATE = f"""
CREATE OR REPLACE FUNCTION serenity_job_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT'
       OR NEW.status IS DISTINCT FROM OLD.status
       OR NEW.phase IS DISTINCT FROM OLD.phase
       OR NEW.updated_at IS DISTINCT FROM OLD.updated_at
       OR NEW.attempts IS DISTINCT FROM OLD.attempts
       OR NEW.error_code IS DISTINCT FROM OLD.error_code
       OR NEW.result IS DISTINCT FROM OLD.result THEN
        PERFORM pg_notify('{CHANNEL}', NEW.id::text);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS async_jobs_changed ON async_jobs;
CREATE TRIGGER async_jobs_changed AFTER INSERT OR UPDATE ON async_jobs
    FOR EACH ROW EXECUTE FUNCTION serenity_job_changed();
"""
DROP = """
DROP TRIGGER IF EXISTS async_jobs_changed ON async_jobs;
DROP FUNCTION IF EXISTS serenity_job_changed();
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_job_event_trace_id")]

    operations = [migrations.RunPython(create, drop)]
