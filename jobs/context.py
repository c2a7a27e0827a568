"""The `JobContext` a handler gets: the job as claimed, its delivery's time budget, and every write fenced on
the lease the delivery holds (jobs/leases.py)."""

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from jobs import checkpoints as merge
from jobs import states
from jobs.checkpoints import MergedCheckpoints
from jobs.exceptions import LeaseLost, OutOfTime, WorkerStopping
from jobs.leases import lease_live_q
from jobs.models import AsyncJob, JobStatus
from serenity.compiled import Compiled, as_uuid, update_sql
from serenity.db import DISCONNECTED, retry_once_on_disconnect
from tokens import services as grants
from tokens.services import LoadedGrant
from tokens.types import PromiseToken

log = logging.getLogger(__name__)


def _fenced_job(job_id: uuid.UUID, token: uuid.UUID | None, now: Any) -> "QuerySet[AsyncJob]":
    """The job row, only while the delivery holding `token` holds its lease and the lease has not expired."""
    return AsyncJob.objects.filter(lease_live_q(now=now), id=job_id, status=JobStatus.IN_PROGRESS, lease_token=token)


# A delivery's fenced writes of the job row, compiled once (serenity/compiled.py): a checkpoint (its keys merged
# in the database, its phase moved when it names one) and a confirmation that the lease is still ours.
_CHECKPOINT = Compiled(
    lambda job_id, token, now, sets, drops, phase: update_sql(
        _fenced_job(job_id, token, now),
        checkpoints=MergedCheckpoints.encoded(sets, drops),
        updated_at=now,
        **({"phase": phase} if phase else {}),
    )
)
_CONFIRM = Compiled(lambda job_id, token, now: update_sql(_fenced_job(job_id, token, now), updated_at=now))

# When this worker process began a warm stop (jobs/worker/stop.py), on the monotonic clock; None: not stopping.
# From then on it claims nothing new; past WORKER_STOP_GRACE_SECONDS it starts no new phase of a running delivery
# (`JobContext.drained_call`).
_stop_began: list[float] = []


def worker_stop_begin(*, at: float | None = None) -> None:
    """This process's worker is stopping (SIGTERM): deliveries not yet claimed hand their message back, and past
    the grace a delivery entering or leaving a drained call hands its job back (`JobContext.drained_call`)."""
    if not _stop_began:
        _stop_began.append(time.monotonic() if at is None else at)


def worker_stop_reset() -> None:
    """A worker (re)built in this process: it is not stopping."""
    _stop_began.clear()


def worker_stopping() -> bool:
    return bool(_stop_began)


def worker_past_grace() -> bool:
    """Stopping for WORKER_STOP_GRACE_SECONDS or more: only drained calls go on."""
    began = _stop_began[0] if _stop_began else None
    return began is not None and time.monotonic() - began >= float(settings.WORKER_STOP_GRACE_SECONDS)


class JobContext:
    """What a handler gets: the job as claimed, its delivery's time budget, and writes fenced on the lease.

    Every write is a conditional UPDATE naming the lease token: zero rows means another delivery owns the
    job, and LeaseLost stops this one before it touches anything outside the database. A write that meets
    a dead database connection is retried once on a fresh one: each gives the same result when its first
    try committed and only the answer was lost.
    The delivery's deadline is JOB_TASK_TIME_LIMIT_SECONDS from when the context is made (after the claim):
    the handler's DRS and Semrush calls take their timeouts from `remaining()` (IMS and SQS calls have their
    own), and `require_time` raises OutOfTime before a phase that cannot fit (the runner hands the job back).
    """

    def __init__(self, job: AsyncJob, lease_token: uuid.UUID, *, worker: str = "", deadline: float | None = None):
        self.job = job
        self.lease_token = lease_token
        self.worker = worker
        self.deadline = deadline if deadline is not None else time.monotonic() + settings.JOB_TASK_TIME_LIMIT_SECONDS
        self.handed_back = False  # set when a stopping worker gave the job back to the queue
        # True inside `drained_call`: a stopping worker lets the call finish (within WORKER_STOP_DRAIN_SECONDS)
        # rather than handing the job back at WORKER_STOP_GRACE_SECONDS. Read and changed under `release_lock`.
        self.in_drained_call = False
        # The lease is released by one thread at a time: the delivery's own, or a stopping worker's hand-back.
        self.release_lock = threading.RLock()

    @property
    def id(self) -> uuid.UUID:
        return self.job.id

    def remaining(self) -> float:
        """Seconds left of this delivery's budget (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def require_time(self, seconds: float, *, before: str) -> None:
        """Raise OutOfTime unless at least `seconds` of the budget are left to start `before`."""
        if self.remaining() < seconds:
            raise OutOfTime(before)

    def _fenced_write(self, statement: Compiled, **values: Any) -> int:
        """Run one of the fenced UPDATEs below on the job row; the rows it changed (0: the lease is not ours)."""
        return statement.execute(job_id=as_uuid(self.job.id), token=self.lease_token, now=timezone.now(), **values)

    def _merged(self, values: dict[str, Any]) -> dict[str, Any]:
        """The job's checkpoints with `values` merged in; a None value removes its key."""
        merged = {**self.job.checkpoints, **values}
        return {key: value for key, value in merged.items() if value is not None}

    def checkpoint(self, *, phase: str | None = None, **values: Any) -> None:
        """Merge `values` into the job's checkpoints (a None value removes its key) and move its phase.
        Fenced on the lease; raises LeaseLost."""
        checkpoints = self._merged(values)
        sets, drops = merge.split(values)
        phase = phase or None  # an empty name moves no phase, as None: one shape of the statement for both
        if retry_once_on_disconnect(lambda: self._fenced_write(_CHECKPOINT, sets=sets, drops=drops, phase=phase)) != 1:
            raise self.lost("checkpoint")
        self.job.checkpoints = checkpoints
        if phase:
            self.job.phase = phase
            states.record(self.job.id, "checkpoint", actor=self.worker, detail=phase)

    def confirm(self) -> None:
        """Fence: prove the lease is still ours right before a call with an effect outside the database (an
        IMS exchange, a Semrush write). Raises LeaseLost.

        It does not extend the lease. The lease's TTL (JOB_LEASE_TTL_SECONDS) already covers the delivery's
        whole budget (JOB_TASK_TIME_LIMIT_SECONDS), and a lease that outlived its message's visibility window
        (QUEUE_VISIBILITY_TIMEOUT_SECONDS) would make the redelivery of a crashed worker's message find the
        lease still held and drop it, leaving the job stranded (the system check keeps the three nested).
        """
        if retry_once_on_disconnect(lambda: self._fenced_write(_CONFIRM)) != 1:
            raise self.lost("confirm")

    def store_rotated_token(self, *, exchanged: LoadedGrant, rotated: PromiseToken, **checkpoint_values: Any) -> None:
        """Store the token an IMS exchange just rotated to, fenced: in one short transaction (no network
        call inside), the job row is updated only while this delivery still holds the lease, and the grant
        only while it still holds the token that was exchanged. `checkpoint_values` go in the same write.

        If either fence fails, the rotated token would be live with no owner: it is invalidated at IMS at
        once (after the transaction), and LeaseLost is raised; so it is when the database stays away (the store's
        retry meets a dead connection too: the error is raised). The job's next delivery then holds the token we
        exchanged, which IMS has rotated away; its own exchange is refused and the job ends NEEDS_REAUTH. A
        store retried after a commit whose answer was lost passes both fences again (the grant already holds
        the rotated token: tokens.services.grant_rotate), so the token is kept.
        """
        checkpoints = self._merged(checkpoint_values)
        sets, drops = merge.split(checkpoint_values)

        def store() -> bool:
            with transaction.atomic():
                fenced = self._fenced_write(_CHECKPOINT, sets=sets, drops=drops, phase=None) == 1
                stored = fenced and grants.grant_rotate(
                    job_id=self.job.id, expect_fingerprint=exchanged.fingerprint, token=rotated
                )
                if fenced and not stored:
                    transaction.set_rollback(True)
            return stored

        try:
            stored = retry_once_on_disconnect(store)
        except DISCONNECTED:
            # The database stayed away (a failover: the retry met a dead connection too). The rotated token is
            # the job's only if a try committed; otherwise nobody holds it, and it is ended now rather than left
            # live. The job's next delivery then finds its exchanged token refused (NEEDS_REAUTH).
            grants.grant_holds_or_invalidate(job_id=self.job.id, pair=exchanged.pair, token=rotated)
            raise
        if not stored:
            # Unless a first try committed it (its answer lost) before the lease went: then the grant holds it,
            # and it is the job's token, for whichever delivery runs the job next.
            grants.grant_holds_or_invalidate(job_id=self.job.id, pair=exchanged.pair, token=rotated)
            raise self.lost("token rotation")
        self.job.checkpoints = checkpoints

    @contextlib.contextmanager
    def heartbeat(self, every: float | None = None) -> Iterator[None]:
        """Confirm the lease in the background while a slow call runs (DRS, up to DRS_TIMEOUT_SECONDS).

        A lost lease is remembered and raised as LeaseLost when the block ends, so the result of the slow
        call is never written by a worker that lost the job meanwhile, and the job's `updated_at` shows an
        operator that the worker is alive.
        """
        every = every or settings.JOB_HEARTBEAT_SECONDS
        stop = threading.Event()
        lost: list[BaseException] = []

        def beat() -> None:
            while not stop.wait(every):
                try:
                    self.confirm()
                except LeaseLost as exc:
                    lost.append(exc)
                    return
                except Exception as exc:  # a DB hiccup: keep beating; the fenced writes after still decide
                    log.warning(
                        "lease heartbeat failed", extra={"job_id": str(self.job.id), "reason": type(exc).__name__}
                    )
                finally:
                    connection.close()  # held only for the beat itself, not for the minutes between beats

        thread = threading.Thread(target=beat, name=f"lease-heartbeat-{self.job.id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        if lost:
            raise lost[0]

    @contextlib.contextmanager
    def drained_call(self, what: str) -> Iterator[None]:
        """A slow outside call whose repetition costs money (DRS: an LLM generation), with the checkpoint that keeps
        its result. A stopping worker waits for it up to WORKER_STOP_DRAIN_SECONDS instead of handing the job back
        at WORKER_STOP_GRACE_SECONDS (jobs/worker/stop.py), so a deploy does not make the call twice.

        Entered or left past the stop's grace: WorkerStopping, so the runner hands the job back (with the result
        checkpointed, when left) instead of starting a phase on a process about to exit; within the grace the
        delivery goes on as usual. The flag is changed under `release_lock`, which a stopping worker's hand-back
        takes too: a delivery inside the block is never handed back before the drain's end, and a result
        checkpointed inside is lost to a hand-back only at the drain's end."""
        if worker_past_grace():
            raise WorkerStopping(f"before {what}")
        with self.release_lock:
            self.in_drained_call = True
        try:
            yield
        finally:
            with self.release_lock:
                self.in_drained_call = False
        if worker_past_grace():
            raise WorkerStopping(f"after {what}")

    def lost(self, where: str) -> LeaseLost:
        """The LeaseLost to raise, logged and written to the job's history."""
        log.warning("lease lost; stopping without further writes", extra={"job_id": str(self.job.id), "at": where})
        try:
            states.record(self.job.id, "lease_lost", actor=self.worker, detail=where)
        except Exception:  # the record is for operators; losing it must not hide the LeaseLost
            log.debug("lease-lost event not recorded", exc_info=True)
        return LeaseLost(where)
