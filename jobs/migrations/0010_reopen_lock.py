"""The lock a request takes on a finished job while it puts the job back to work is the reopen lock: `claim`
named a lease's claim too. The fields alone are renamed; their columns keep their names (`db_column`), so the
database is not changed and processes still running the previous code go on reading and writing the same
columns."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0009_job_parked_at")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveConstraint(model_name="asyncjob", name="async_job_claim_only_finished"),
                migrations.RenameField(model_name="asyncjob", old_name="claim", new_name="reopen_lock"),
                migrations.RenameField(
                    model_name="asyncjob", old_name="claim_expires_at", new_name="reopen_lock_expires_at"
                ),
                migrations.AlterField(
                    model_name="asyncjob",
                    name="reopen_lock",
                    field=models.UUIDField(blank=True, db_column="claim", null=True),
                ),
                migrations.AlterField(
                    model_name="asyncjob",
                    name="reopen_lock_expires_at",
                    field=models.DateTimeField(blank=True, db_column="claim_expires_at", null=True),
                ),
                migrations.AddConstraint(
                    model_name="asyncjob",
                    constraint=models.CheckConstraint(
                        condition=models.Q(reopen_lock__isnull=True)
                        | (~models.Q(status="IN_PROGRESS") & models.Q(reopen_lock_expires_at__isnull=False)),
                        name="async_job_claim_only_finished",
                    ),
                ),
            ],
        ),
    ]
