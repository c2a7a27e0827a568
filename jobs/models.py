"""Asynchronous jobs (`async_jobs`) and their event history. Status changes go through jobs/states.py."""
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class JobStatus(models.TextChoices):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


def default_expires_at():
    return timezone.now() + timedelta(days=settings.JOB_RECORD_TTL_DAYS)


class AsyncJob(models.Model):
    # The id is chosen by the producer (deterministic per market slice), never generated here.
    id = models.UUIDField(primary_key=True, editable=False)
    job_type = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.IN_PROGRESS)

    # Ownership. Plain ids: `jobs` knows nothing of the apps whose work it runs.
    organization_id = models.UUIDField()
    brand_id = models.UUIDField(null=True, blank=True)
    site_id = models.UUIDField(null=True, blank=True)
    user_id = models.CharField(max_length=255, null=True, blank=True, help_text="IMS user_id claim of the requester")

    params = models.JSONField(default=dict, help_text="Input parameters; never a token")
    phase = models.CharField(max_length=32, default="queued", help_text="Last checkpoint reached")
    checkpoints = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True, help_text="{code, message, retryable, needsReauth}")
    error_code = models.CharField(max_length=64, null=True, blank=True, db_index=True)

    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_epoch = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    # Held by the one request putting a finished job back to work (a re-authorisation, a regeneration) while
    # it obtains a credential outside any transaction; concurrent requests see it and step aside.
    claim = models.UUIDField(null=True, blank=True)
    claim_expires_at = models.DateTimeField(null=True, blank=True)

    message_sent_at = models.DateTimeField(null=True, blank=True, help_text="When its queue message last went out")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(default=default_expires_at)

    class Meta:
        db_table = "async_jobs"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in JobStatus]), name="async_job_status_valid"
            ),
            # A terminal job holds no lease; a live lease has an expiry.
            models.CheckConstraint(
                condition=models.Q(lease_token__isnull=True)
                | models.Q(status="IN_PROGRESS", lease_expires_at__isnull=False),
                name="async_job_lease_only_in_progress",
            ),
            # A claim only on a finished job, always with an expiry.
            models.CheckConstraint(
                condition=models.Q(claim__isnull=True)
                | (~models.Q(status="IN_PROGRESS") & models.Q(claim_expires_at__isnull=False)),
                name="async_job_claim_only_finished",
            ),
        ]
        indexes = [
            models.Index(fields=["brand_id", "job_type"], name="async_job_brand_type"),
            models.Index(fields=["status", "updated_at"], name="async_job_status_updated"),
            models.Index(fields=["status", "lease_expires_at"], name="async_job_status_lease"),
            models.Index(fields=["status", "message_sent_at"], name="async_job_status_sent"),
            models.Index(fields=["expires_at"], name="async_job_expires"),
        ]

    def __str__(self):
        return f"{self.job_type} {self.id} {self.status}"

    def lease_state(self, now=None) -> str:
        """`held`, `expired` or `none`."""
        if self.lease_token is None:
            return "none"
        return "held" if self.lease_expires_at and self.lease_expires_at > (now or timezone.now()) else "expired"


class JobEvent(models.Model):
    """One line of a job's history: what an operator reads to know what happened and who did it."""

    job = models.ForeignKey(AsyncJob, on_delete=models.CASCADE, related_name="events", db_constraint=True)
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=32)
    actor = models.CharField(max_length=128, blank=True)
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["job", "at"], name="job_event_job_at")]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind} {self.detail}"
