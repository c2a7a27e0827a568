"""Job leases: the compare-and-swap claim that lets exactly one delivery run a job, and its release.

A lease is (token, expiry). Claiming is one conditional UPDATE on a job that is IN_PROGRESS with no live
lease; every later write of the delivery names the token (jobs/handlers.py, JobContext), so a delivery
whose lease was taken over updates zero rows and stops.
"""
import uuid
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs import states
from jobs.models import AsyncJob, JobStatus


def lease_claim(job_id: UUID | str, *, worker: str = "", ttl: int | None = None) -> uuid.UUID | None:
    """Take the lease if the job is IN_PROGRESS and its lease is absent or expired; count the attempt.

    Returns the new lease token, or None when another delivery holds it (or the job is not running).
    Database errors propagate: the caller fails closed and the message is redelivered.
    """
    now = timezone.now()
    token = uuid.uuid4()
    claimed = (
        AsyncJob.objects.filter(id=job_id, status=JobStatus.IN_PROGRESS)
        .filter(Q(lease_token__isnull=True) | Q(lease_expires_at__lte=now))
        .update(
            lease_token=token,
            lease_expires_at=now + timedelta(seconds=ttl or settings.JOB_LEASE_TTL_SECONDS),
            lease_epoch=F("lease_epoch") + 1,
            attempts=F("attempts") + 1,
            # Taking over an expired lease: the delivery that held it died without an outcome.
            lost_deliveries=F("lost_deliveries") + Case(When(lease_token__isnull=False, then=1), default=0),
            updated_at=now,
            started_at=Coalesce(F("started_at"), Value(now)),
        )
    )
    if claimed != 1:
        return None
    states.record(job_id, "lease_claimed", actor=worker)
    return token


def lease_release(job_id: UUID | str, lease_token: UUID, *, reason: str = "", **fields: Any) -> bool:
    """Give the lease back (the job stays IN_PROGRESS); `fields` are set in the same UPDATE. A delivery that
    gives its lease back ended with an outcome, so the run of lost deliveries ends. False when it was no
    longer ours."""
    released = AsyncJob.objects.filter(id=job_id, lease_token=lease_token).update(
        lease_token=None, lease_expires_at=None, lost_deliveries=0, updated_at=timezone.now(), **fields
    )
    if released:
        states.record(job_id, "lease_released", detail=reason)
    return released == 1


def lease_release_stale(job_id: UUID | str, *, actor: str) -> bool:
    """Operator action: clear an expired lease on an IN_PROGRESS job (its delivery died without an outcome,
    counted in `lost_deliveries`). Never touches a live lease."""
    now = timezone.now()
    released = AsyncJob.objects.filter(
        id=job_id, status=JobStatus.IN_PROGRESS, lease_token__isnull=False, lease_expires_at__lte=now
    ).update(lease_token=None, lease_expires_at=None, lost_deliveries=F("lost_deliveries") + 1, updated_at=now)
    if released:
        states.record(job_id, "lease_released", actor=actor, detail="stale lease released")
    return released == 1
