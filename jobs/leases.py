"""Job leases: the compare-and-swap claim that lets exactly one delivery run a job, and fenced writes.

A lease is (token, expiry). Claiming is one conditional UPDATE on a job that is IN_PROGRESS with no
live lease; every later write names the token, so a worker whose lease was taken over updates zero
rows, learns it with `LeaseLost`, and stops before touching anything outside the database.
"""
import contextlib
import logging
import threading
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from jobs import states
from jobs.exceptions import LeaseLost
from jobs.models import AsyncJob
from tokens import services as grants
from tokens.services import LoadedGrant
from tokens.types import PromiseToken

log = logging.getLogger(__name__)


def lease_claim(job_id, *, worker: str = "", ttl: int | None = None) -> uuid.UUID | None:
    """Take the lease if the job is IN_PROGRESS and its lease is absent or expired.

    Returns the new lease token, or None when another delivery holds it (or the job is not running).
    Database errors propagate: the caller fails closed and the message is redelivered.
    """
    now = timezone.now()
    token = uuid.uuid4()
    claimed = (
        AsyncJob.objects.filter(id=job_id, status=states.IN_PROGRESS)
        .filter(Q(lease_token__isnull=True) | Q(lease_expires_at__lte=now))
        .update(
            lease_token=token,
            lease_expires_at=now + timedelta(seconds=ttl or settings.JOB_LEASE_TTL_SECONDS),
            lease_epoch=F("lease_epoch") + 1,
            attempts=F("attempts") + 1,
            updated_at=now,
        )
    )
    if claimed != 1:
        return None
    AsyncJob.objects.filter(id=job_id, started_at__isnull=True).update(started_at=now)
    states.record(job_id, "lease_claimed", actor=worker)
    return token


def lease_release(job_id, lease_token, *, reason: str = "", **fields) -> bool:
    """Give the lease back (the job stays IN_PROGRESS). False when it was no longer ours."""
    released = AsyncJob.objects.filter(id=job_id, lease_token=lease_token).update(
        lease_token=None, lease_expires_at=None, updated_at=timezone.now(), **fields
    )
    if released:
        states.record(job_id, "lease_released", detail=reason)
    return released == 1


def lease_release_stale(job_id, *, actor: str) -> bool:
    """Operator action: clear an expired lease on an IN_PROGRESS job. Never touches a live lease."""
    now = timezone.now()
    released = AsyncJob.objects.filter(
        id=job_id, status=states.IN_PROGRESS, lease_token__isnull=False, lease_expires_at__lte=now
    ).update(lease_token=None, lease_expires_at=None, updated_at=now)
    if released:
        states.record(job_id, "lease_released", actor=actor, detail="stale lease released")
    return released == 1


class JobRun:
    """What a handler gets: the job as claimed, and writes fenced on the lease it holds."""

    def __init__(self, job: AsyncJob, lease_token: uuid.UUID, *, worker: str = ""):
        self.job = job
        self.lease_token = lease_token
        self.worker = worker

    @property
    def id(self):
        return self.job.id

    def _fenced(self):
        """The job row, only while this run's lease is the job's lease and has not expired."""
        return AsyncJob.objects.filter(id=self.job.id, status=states.IN_PROGRESS, lease_token=self.lease_token,
                                       lease_expires_at__gt=timezone.now())

    def _merged(self, values: dict) -> dict:
        """The job's checkpoints with `values` merged in; a None value removes its key."""
        merged = {**self.job.checkpoints, **values}
        return {key: value for key, value in merged.items() if value is not None}

    def checkpoint(self, *, phase: str | None = None, **values) -> None:
        """Merge `values` into the job's checkpoints (a None value removes its key) and move its phase.
        Raises LeaseLost."""
        checkpoints = self._merged(values)
        fields = {"checkpoints": checkpoints, "updated_at": timezone.now()}
        if phase:
            fields["phase"] = phase
        if self._fenced().update(**fields) != 1:
            raise self.lost("checkpoint")
        self.job.checkpoints = checkpoints
        if phase:
            self.job.phase = phase
            states.record(self.job.id, "checkpoint", actor=self.worker, detail=phase)

    def confirm(self) -> None:
        """Fence: prove the lease is still ours right before a call with an effect outside the database (an
        IMS exchange, a Semrush write). Raises LeaseLost.

        It does not extend the lease. The TTL (930 s) already covers the whole task budget (900 s), and a
        lease that outlived its message's visibility window (960 s) would make the redelivery of a crashed
        worker's message find the lease still held and drop it, leaving the job stranded.
        """
        if self._fenced().update(updated_at=timezone.now()) != 1:
            raise self.lost("confirm")

    def store_rotated_token(self, *, exchanged: LoadedGrant, rotated: PromiseToken, **checkpoint_values) -> None:
        """Store the token an IMS exchange just rotated to, fenced: in one short transaction (no network
        call inside), the job row is updated only while this run still holds the lease, and the grant only
        while it still holds the token that was exchanged. `checkpoint_values` are merged in the same write.

        If either fence fails, the rotated token would be live with no owner: it is invalidated at IMS at
        once (after the transaction), and LeaseLost is raised. The job's new owner then holds the token we
        exchanged, which IMS has rotated away; its own exchange is refused and the job ends NEEDS_REAUTH.
        """
        checkpoints = self._merged(checkpoint_values)
        with transaction.atomic():
            fenced = self._fenced().update(checkpoints=checkpoints, updated_at=timezone.now()) == 1
            stored = fenced and grants.grant_rotate(job_id=self.job.id, expect_fingerprint=exchanged.fingerprint,
                                                    token=rotated)
            if fenced and not stored:
                transaction.set_rollback(True)
        if not stored:
            grants.promise_invalidate_quietly(pair=exchanged.pair, token=rotated, job_id=self.job.id)
            raise self.lost("token rotation")
        self.job.checkpoints = checkpoints

    @contextlib.contextmanager
    def heartbeat(self, every: float | None = None):
        """Confirm the lease in the background while a slow call runs (DRS, up to 300 s).

        A lost lease is remembered and raised as LeaseLost when the block ends, so the result of the slow
        call is never written by a worker that lost the job meanwhile, and the job's `updated_at` shows an
        operator that the worker is alive.
        """
        every = every or settings.JOB_HEARTBEAT_SECONDS
        stop = threading.Event()
        lost: list[BaseException] = []

        def beat():
            try:
                while not stop.wait(every):
                    self.confirm()
            except LeaseLost as exc:
                lost.append(exc)
            except Exception as exc:  # a DB hiccup: the fenced writes after the call still decide
                log.warning("lease heartbeat failed", extra={"job_id": str(self.job.id), "reason": type(exc).__name__})
            finally:
                connection.close()

        thread = threading.Thread(target=beat, name=f"lease-heartbeat-{self.job.id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        if lost:
            raise lost[0]

    def lost(self, where: str) -> LeaseLost:
        log.warning("lease lost; stopping without further writes", extra={"job_id": str(self.job.id), "at": where})
        try:
            states.record(self.job.id, "lease_lost", actor=self.worker, detail=where)
        except Exception:  # the record is for operators; losing it must not hide the LeaseLost
            log.debug("lease-lost event not recorded", exc_info=True)
        return LeaseLost(where)
