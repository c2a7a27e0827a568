"""Asynchronous jobs (`async_jobs`) and their event history. Status changes go through jobs/states.py."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class JobStatus(models.TextChoices):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class LeaseState(models.TextChoices):
    """Where a job's lease stands at a moment: `AsyncJob.lease_state`, and as a filter `jobs.leases.lease_state_q`."""

    HELD = "held"  # a live lease: a delivery holds the job until `lease_expires_at`, still ahead
    EXPIRED = "expired"  # its delivery died without an outcome (the expiry passed) and nothing took it over yet
    NONE = "none"  # no lease: never claimed, given back, or the job is finished


def default_expires_at(now: datetime | None = None) -> datetime:
    """When a job record created (or put back to work) at `now` expires: JOB_RECORD_TTL_DAYS later."""
    return (now or timezone.now()) + timedelta(days=settings.JOB_RECORD_TTL_DAYS)


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
    # Deliveries in a row that ended without an outcome: their worker died holding the lease (it expired and
    # was taken over or released by an operator). Reset when a delivery gives its lease back itself (a
    # retry, a hand-back) and when the job is put back to work. Two in a row is a crash loop: nothing
    # re-sends such a job by itself (SPEC §9).
    lost_deliveries = models.PositiveIntegerField(default=0)
    # Deliveries of this run that a throttled call sent back (back-pressure: each gave its attempt back). Reset
    # when the job is put back to work; JOB_MAX_THROTTLES of them end it THROTTLED_TOO_LONG (jobs/retries.py).
    throttles = models.PositiveIntegerField(default=0)
    # Set when a delivery parked the job instead of running it (a crash loop, or the last receive its message
    # had before the DLQ; jobs/leases.py `lease_park`): its message is deleted and nothing runs it until an
    # operator names it (re-sent) or marks it failed. Cleared by every status change and by the re-send.
    # The job stays IN_PROGRESS: the poll shows it as the UI's "provisioning" (SPEC §7).
    parked_at = models.DateTimeField(null=True, blank=True)
    # The reopen lock: held by the one request putting a finished job back to work (a re-authorisation, a
    # regeneration) while it obtains a credential outside any transaction; concurrent requests see it and step
    # aside. Not a lease: no delivery takes it. Its columns and constraint keep their first name, `claim`
    # (migration 0010 renamed the fields alone).
    reopen_lock = models.UUIDField(null=True, blank=True, db_column="claim")
    reopen_lock_expires_at = models.DateTimeField(null=True, blank=True, db_column="claim_expires_at")

    message_sent_at = models.DateTimeField(null=True, blank=True, help_text="When its queue message last went out")
    # When that message can first be received (later than `message_sent_at` for a delayed one: a retry, a
    # delivery held back for fairness). Until then the job is not waiting for a worker (jobs/leases.py).
    runnable_at = models.DateTimeField(null=True, blank=True, help_text="When its last message becomes receivable")
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
            # A reopen lock only on a finished job, always with an expiry.
            models.CheckConstraint(
                condition=models.Q(reopen_lock__isnull=True)
                | (~models.Q(status="IN_PROGRESS") & models.Q(reopen_lock_expires_at__isnull=False)),
                name="async_job_claim_only_finished",
            ),
        ]
        indexes = [
            models.Index(fields=["brand_id", "job_type"], name="async_job_brand_type"),
            models.Index(fields=["status", "updated_at"], name="async_job_status_updated"),
            models.Index(fields=["status", "lease_expires_at"], name="async_job_status_lease"),
            models.Index(fields=["status", "message_sent_at"], name="async_job_status_sent"),
            models.Index(fields=["expires_at"], name="async_job_expires"),
            # The fairness rule's count of an organization's running generations (jobs/leases.py).
            models.Index(fields=["organization_id", "status", "lease_expires_at"], name="async_job_org_running"),
        ]

    def __str__(self) -> str:
        return f"{self.job_type} {self.id} {self.status}"

    def lease_state(self, now: datetime | None = None) -> LeaseState:
        """Where the job's lease stands at `now`."""
        if self.lease_token is None:
            return LeaseState.NONE
        live = self.lease_expires_at and self.lease_expires_at > (now or timezone.now())
        return LeaseState.HELD if live else LeaseState.EXPIRED


class WorkerHeartbeat(models.Model):
    """One row per running worker process: the queues it consumes and when its consumer loop last turned.

    Written every WORKER_HEARTBEAT_SECONDS by the worker itself (jobs/worker/heartbeats.py) and deleted when it stops;
    a worker silent for WORKER_SILENT_HEARTBEATS beats is dead. This, not a job's lease, is what tells the
    doctor and the probe whether anything consumes a queue.
    """

    worker = models.CharField(max_length=255, primary_key=True, help_text="host:pid of the worker process")
    # Comma-wrapped queue names (`,serenity-market-jobs,serenity-maintenance,`): one `contains` lookup that
    # PostgreSQL and SQLite both run.
    queues = models.CharField(max_length=1000)
    started_at = models.DateTimeField(default=timezone.now)
    beat_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "worker_heartbeats"

    def __str__(self) -> str:
        return f"{self.worker} {self.beat_at:%Y-%m-%d %H:%M:%S}"

    @property
    def queue_names(self) -> list[str]:
        return [name for name in self.queues.split(",") if name]


class JobEvent(models.Model):
    """One line of a job's history: what an operator reads to know what happened and who did it."""

    job = models.ForeignKey(AsyncJob, on_delete=models.CASCADE, related_name="events", db_constraint=True)
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=32)
    actor = models.CharField(max_length=128, blank=True)
    detail = models.CharField(max_length=500, blank=True)
    # The trace the event happened in (32 hex digits; "" outside any trace): the request that created or
    # re-authorised the job, the delivery that ran it. The admin draws the job's waterfall from these traces.
    trace_id = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["job", "at"], name="job_event_job_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind} {self.detail}"
