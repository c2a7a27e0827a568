"""Grants carry a keyed fingerprint of their token, unique across grants (one owner per token)."""
from django.db import migrations, models


def fingerprint_existing(apps, schema_editor):
    from tokens import crypto
    from tokens.fingerprints import token_fingerprint

    grant_model = apps.get_model("tokens", "PromiseGrant")
    seen = set()
    for grant in grant_model.objects.all().iterator():
        try:
            value = token_fingerprint(crypto.unseal(grant.ciphertext).promise_token)
        except Exception:  # a grant no key opens can never be exchanged: give it a fingerprint of its own
            value = "unreadable-" + str(grant.job_id)
        if value in seen:  # a token already owned by another grant: this copy can only fail at exchange
            value = "duplicate-" + str(grant.job_id)
        seen.add(value)
        grant.fingerprint = value
        grant.save(update_fields=["fingerprint"])


class Migration(migrations.Migration):
    dependencies = [("tokens", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="promisegrant", name="fingerprint",
            field=models.CharField(max_length=64, null=True, help_text="HMAC-SHA256 of the token value"),
        ),
        migrations.RunPython(fingerprint_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="promisegrant", name="fingerprint",
            field=models.CharField(max_length=64, unique=True, help_text="HMAC-SHA256 of the token value"),
        ),
    ]
