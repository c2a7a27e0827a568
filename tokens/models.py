"""Promise grants: a job's delegated credential, encrypted at rest, stored apart from the job row."""

from django.db import models
from django.utils import timezone


class PromiseGrant(models.Model):
    # One grant per job; a plain id because `tokens` sits below `jobs` in the dependency order.
    job_id = models.UUIDField(unique=True)
    pair = models.CharField(max_length=32, help_text="Name of the IMS client pair the token belongs to")
    ciphertext = models.TextField(help_text="MultiFernet-encrypted typed promise token")
    # A keyed hash of the token value (never the value): unique, so no two grants can ever hold one token.
    fingerprint = models.CharField(max_length=64, unique=True, help_text="HMAC-SHA256 of the token value")
    expires_at = models.DateTimeField(null=True, blank=True)
    rotations = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"grant for job {self.job_id} ({self.pair})"
