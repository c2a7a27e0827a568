"""The one job state machine: the allowed transitions, the only function that changes a job's status, and
the job's history.

    IN_PROGRESS  --complete--> COMPLETED    (the handler's last step; services/endings.py)
    IN_PROGRESS  --fail------> FAILED       (the handler, the retry decision, an operator's job_mark_failed, or a
                                             cancellation: what the job works on is gone, services/endings.py)
    FAILED       --reauth----> IN_PROGRESS  (awaiting re-authorisation only, by its user; services/producer.py)
    FAILED       --rerun-----> IN_PROGRESS  (a retryable failure that kept its credential; services/operator.py)
    any terminal --replace---> IN_PROGRESS  (the producer reuses the deterministic id for a fresh job)

CANCELLED is a status the database accepts and the poll can show, but nothing in the product moves a job there
today; a job reaching it (by hand) is terminal like the others and may be replaced.

Every change is one conditional UPDATE naming the expected current status (and, for a worker, its
lease token): zero rows means someone else moved the job first, and the caller must stop.
Statuses are `jobs.models.JobStatus`, the one name for each.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from django.utils import timezone

from jobs.models import AsyncJob, JobEvent, JobStatus
from serenity import tracing
from serenity.compiled import Compiled, as_uuid, insert_sql, update_sql

TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})

ALLOWED: dict[str, frozenset[str]] = {
    JobStatus.IN_PROGRESS: frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED}),
    JobStatus.FAILED: frozenset({JobStatus.IN_PROGRESS}),
    JobStatus.COMPLETED: frozenset({JobStatus.IN_PROGRESS}),
    JobStatus.CANCELLED: frozenset({JobStatus.IN_PROGRESS}),
}


class IllegalTransition(ValueError):
    pass


def error_doc(code: str, message: str, *, retryable: bool = False, needs_reauth: bool = False) -> dict[str, Any]:
    """The stored error of a FAILED job: `{code, message, retryable, needsReauth}`."""
    return {"code": code, "message": message, "retryable": retryable, "needsReauth": needs_reauth}


def transition(
    job_id: UUID | str,
    *,
    to: str,
    expect: str | frozenset[str] = JobStatus.IN_PROGRESS,
    lease_token: UUID | None = None,
    event: str,
    actor: str = "",
    detail: str = "",
    extra_filter: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Move a job to `to` if it is in `expect` (and holds `lease_token` when given). True when it moved.

    `fields` are set in the same UPDATE. Terminal states clear the lease and set `ended_at`; IN_PROGRESS
    clears `ended_at`. The event row is written in the caller's transaction (call it inside `atomic()` to
    make both one unit).
    """
    expected = {expect} if isinstance(expect, str) else set(expect)
    if any(to not in ALLOWED[s] for s in expected):
        raise IllegalTransition(f"{sorted(expected)} -> {to}")
    now = timezone.now()
    values: dict[str, Any] = {"status": to, "updated_at": now, "parked_at": None, **fields}
    if to in TERMINAL:
        values.update(lease_token=None, lease_expires_at=None, ended_at=now)
    else:
        values.update(ended_at=None)
    if extra_filter:
        moved = _moving(job_id, expected, lease_token, **extra_filter).update(**values) == 1
    else:
        moved = (
            _TRANSITION.execute(
                fixed={"expected": tuple(sorted(expected))}, job_id=as_uuid(job_id), holder=lease_token, **values
            )
            == 1
        )
    if moved:
        record(job_id, event, actor=actor, detail=detail, at=now)
    return moved


def record(job_id: UUID | str, kind: str, *, actor: str = "", detail: str = "", at: datetime | None = None) -> None:
    """Append an event that is not a status change (lease claim/loss, retry, checkpoint); `at` when it happened
    before it could be written (a send is recorded once it returned, but happened when it began)."""
    _EVENT.execute(
        job_id=as_uuid(job_id),
        kind=kind,
        actor=actor,
        detail=detail[:500],
        trace_id=tracing.current_trace_id(),
        at=at or timezone.now(),
    )


def _transition_sql(
    *, expected: tuple[str, ...], job_id: UUID, holder: UUID | None, **values: Any
) -> tuple[str, Sequence[Any]]:
    """`transition`'s UPDATE without `extra_filter`."""
    return update_sql(_moving(job_id, expected, holder), **values)


def _moving(job_id: UUID | str, expected: Any, holder: UUID | None, **extra_filter: Any) -> "QuerySet[AsyncJob]":
    """The job `transition` moves: in one of the `expected` statuses, held by `holder` when given."""
    qs = AsyncJob.objects.filter(id=job_id, status__in=expected, **extra_filter)
    return qs if holder is None else qs.filter(lease_token=holder)


# Every delivery ends with a transition (its result or error a JSON parameter), without `extra_filter` (a
# cancellation's narrowing is left to the ORM): compiled once per shape (serenity/compiled.py).
_TRANSITION = Compiled(_transition_sql)

# Every history row, compiled once (serenity/compiled.py): a delivery writes several.
_EVENT = Compiled(lambda **values: insert_sql(JobEvent, **values))
