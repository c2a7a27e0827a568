"""The re-authorisation claim becomes the claim of any request putting a finished job back to work."""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_reauth_claim")]

    operations = [
        migrations.RemoveConstraint(model_name="asyncjob", name="async_job_reauth_claim_only_failed"),
        migrations.RenameField(model_name="asyncjob", old_name="reauth_claim", new_name="claim"),
        migrations.RenameField(model_name="asyncjob", old_name="reauth_claim_expires_at", new_name="claim_expires_at"),
        migrations.AddConstraint(
            model_name="asyncjob",
            constraint=models.CheckConstraint(
                condition=models.Q(claim__isnull=True)
                | (~models.Q(status="IN_PROGRESS") & models.Q(claim_expires_at__isnull=False)),
                name="async_job_claim_only_finished",
            ),
        ),
    ]
