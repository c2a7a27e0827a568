"""The one way a job ends: its terminal status and the deletion of its grant in one transaction, then the
token's invalidation at IMS after the commit. A finished job holds no credential, with one exception: a job
that failed retryably (RETRIES_EXHAUSTED: an outage outlasted its attempts) keeps its credential, a *retained
credential*, so an operator can re-run it once the outage is over without its user coming back
(services/operator.py, `job_rerun`). A retained credential ends when the job is re-run and finishes, replaced by
a regeneration, or purged with the record, or when the job is cancelled (`job_cancel`: what it works on is
gone)."""

from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from jobs import codes, states
from jobs.models import AsyncJob, JobStatus
from serenity.db import DISCONNECTED
from tokens import services as grants


def job_finish(
    job_id: UUID | str,
    *,
    to: str,
    event: str,
    lease_token: UUID | None = None,
    actor: str = "",
    detail: str = "",
    error: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
    extra_filter: dict[str, Any] | None = None,
    keep_credential: bool = False,
) -> bool:
    """Move an IN_PROGRESS job to the terminal status `to` (fenced on `lease_token` when given), recording
    `event`; set its `error` (and `error_code` from it) or its `result`. Deletes the grant in the same
    transaction and invalidates its token at IMS after the commit, best effort, unless `keep_credential`
    (a retryable failure, see above). True when the job moved, also when the commit's answer was lost but
    the job is found ended as asked (its token is invalidated all the same)."""
    fields: dict[str, Any] = {"result": result, "error": error, "error_code": error["code"] if error else None}
    taken: grants.TakenGrant | None = None
    try:
        with transaction.atomic():
            moved = states.transition(
                job_id,
                to=to,
                lease_token=lease_token,
                event=event,
                actor=actor,
                detail=detail,
                extra_filter=extra_filter,
                **fields,
            )
            taken = grants.grant_take(job_id) if moved and not keep_credential else None
    except DISCONNECTED:
        # The connection died at the commit, its answer lost: if the job has ended as asked, with its grant
        # gone, the commit happened, and the token it took must still be invalidated. Otherwise the caller's
        # retry (serenity.db.retry_once_on_disconnect) moves it.
        if taken is None or connection.in_atomic_block:
            raise
        try:
            ended = _ended(job_id, to)
        except DISCONNECTED:
            # The database cannot say whether the commit landed. The job was ending, so its token is done with
            # either way: ended now, rather than left live with nobody holding it if the commit did land (the
            # retry would then find nothing to end, and nothing to invalidate).
            taken.invalidate()
            raise
        if not ended:
            raise
        moved = True
    if taken is not None:
        taken.invalidate()
    return moved


def _ended(job_id: UUID | str, to: str) -> bool:
    """Read on a fresh connection: the job is in `to` and holds no grant."""
    connection.close()
    return AsyncJob.objects.filter(id=job_id, status=to).exists() and not grants.grant_exists(job_id)


def job_cancel(
    job_id: UUID | str, *, code: str, reason: str, actor: str, extra_filter: dict[str, Any] | None = None
) -> bool:
    """Cancel a job because what it works on is gone (a market deleted while its prompts were being generated),
    whichever delivery is running it. It ends once, FAILED with `code` (not retryable; the stored error says
    `cancelled`), recorded as `cancelled` by `actor` with `reason`; `extra_filter` narrows which job may be
    cancelled (the job must still be about the subject that is gone).

    - IN_PROGRESS: FAILED through the state machine, whatever lease it holds. The lease is cleared with the
      status, so a delivery running the job finds it gone at its next fenced write (a checkpoint, a DRS result,
      a rotated token, a fenced call) and stops without writing anything.
    - FAILED but able to come back (awaiting re-authorisation, or retryable with its credential retained): its error
      becomes `code` and a re-authorisation or regeneration that holds its reopen lock loses it, so neither a
      re-authorisation nor a re-run nor that request puts it back to work.
    - Anything else (finished for good, or missing): left as it is; False.

    Its grant is deleted in the same transaction, inside the caller's when there is one (one unit with the
    caller's own write), and the token it held is invalidated at IMS after the outermost commit, best effort.
    True when the job was cancelled by this call.
    """
    error = {**states.error_doc(code, reason), "cancelled": True}
    with transaction.atomic():
        cancelled = states.transition(
            job_id,
            to=JobStatus.FAILED,
            event="cancelled",
            actor=actor,
            detail=f"{code}: {reason}",
            extra_filter=extra_filter,
            error=error,
            error_code=code,
            result=None,
        )
        if not cancelled:
            cancelled = (
                AsyncJob.objects.filter(id=job_id, status=JobStatus.FAILED, **(extra_filter or {}))
                .filter(Q(error_code=codes.NEEDS_REAUTH) | Q(error__retryable=True))
                .update(
                    error=error,
                    error_code=code,
                    reopen_lock=None,
                    reopen_lock_expires_at=None,
                    updated_at=timezone.now(),
                )
                == 1
            )
            if cancelled:
                states.record(job_id, "cancelled", actor=actor, detail=f"{code}: {reason} (it had ended already)")
        taken = grants.grant_take(job_id) if cancelled else None
    if taken is not None:
        transaction.on_commit(taken.invalidate)
    return cancelled
