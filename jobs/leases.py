"""Job leases: the compare-and-swap claim that lets exactly one delivery run a job, and its release.

A lease is (token, expiry). Claiming is one conditional UPDATE on a job that is IN_PROGRESS with no live
lease; every later write of the delivery names the token (jobs/context.py, JobContext), so a delivery
whose lease was taken over updates zero rows and stops.
"""

import uuid
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, Count, Exists, F, Q, QuerySet, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs import states
from jobs.exceptions import DeliveryNotStarted
from jobs.models import AsyncJob, JobStatus, LeaseState
from serenity.compiled import Compiled, as_uuid, update_sql
from serenity.db import DISCONNECTED, retry_once_on_disconnect

# Deliveries in a row that died without an outcome (an expired lease included) after which a job is taken for
# a crash loop: what it does may be what kills its workers, so nothing re-sends it without an operator.
CRASH_LOOP_LOST_DELIVERIES = 2


# --- What a lease is, as a filter: the one definition of each state (`AsyncJob.lease_state` in Python) ---------


def lease_live_q(*, now: datetime | None = None) -> Q:
    """Jobs under a live lease at `now` (LeaseState.HELD): a delivery holds them and its lease has not expired."""
    return Q(lease_token__isnull=False, lease_expires_at__gt=now or timezone.now())


def lease_free_q(*, now: datetime | None = None) -> Q:
    """Jobs with no live lease at `now` (LeaseState.NONE or EXPIRED): none at all, or one that expired, which a
    claim takes over."""
    return Q(lease_token__isnull=True) | Q(lease_expires_at__lte=now or timezone.now())


def lease_expired_q(*, now: datetime | None = None) -> Q:
    """Jobs whose lease expired by `now` and was not taken over (LeaseState.EXPIRED): its delivery died without
    an outcome."""
    return Q(lease_token__isnull=False, lease_expires_at__lte=now or timezone.now())


def lease_state_q(state: str, *, now: datetime | None = None) -> Q:
    """Jobs whose lease is in `state` (a LeaseState value) at `now`. Raises ValueError for any other value."""
    state = LeaseState(state)
    if state == LeaseState.HELD:
        return lease_live_q(now=now)
    if state == LeaseState.EXPIRED:
        return lease_expired_q(now=now)
    return Q(lease_token__isnull=True)  # LeaseState.NONE


# --- Crash loops and parking: the one rule, as a filter and on a row in hand --------------------------------------


def lost_in_a_row(job: AsyncJob, *, now: datetime | None = None) -> int:
    """The deliveries of `job` in a row that died without an outcome at `now`: those its row counts, and the one
    whose lease expired without being taken over yet (its worker died too)."""
    return job.lost_deliveries + (1 if job.lease_state(now) == LeaseState.EXPIRED else 0)


def crash_looping(job: AsyncJob, *, now: datetime | None = None) -> bool:
    """The crash-loop rule on a row in hand: CRASH_LOOP_LOST_DELIVERIES lost in a row (`lost_in_a_row`). The same
    rule as `crash_loop_q`, whatever the job's status."""
    return lost_in_a_row(job, now=now) >= CRASH_LOOP_LOST_DELIVERIES


def crash_loop_q(*, now: datetime | None = None) -> Q:
    """The crash-loop rule as a filter: CRASH_LOOP_LOST_DELIVERIES lost in a row, counting an expired lease not
    taken over yet (`crash_looping` on a row in hand). The claim never runs such a job, a delivery parks it
    (`lease_park`), the fairness rule does not count it as waiting (`waiting_jobs`), and the operator views
    report it (`crash_looping_or_parked_q`)."""
    return Q(lost_deliveries__gte=CRASH_LOOP_LOST_DELIVERIES) | (
        Q(lost_deliveries__gte=CRASH_LOOP_LOST_DELIVERIES - 1) & lease_expired_q(now=now)
    )


def crash_loop_within_reach(job: AsyncJob) -> bool:
    """Whether a claim could find `job`, as read, crash-looping: its row counts at least all but one of the lost
    deliveries (the claim counts an expired lease it would take over as one more). Only then does a delivery
    try to park the job before claiming it."""
    return job.lost_deliveries >= CRASH_LOOP_LOST_DELIVERIES - 1


def parked_q() -> Q:
    """Jobs a delivery parked instead of running (`lease_park`): `parked_at` is set. They hold no lease and no
    message; nothing runs or re-sends them until an operator names one (re-sent) or marks it failed."""
    return Q(parked_at__isnull=False)


def crash_looping_or_parked_q(*, now: datetime | None = None) -> Q:
    """IN_PROGRESS jobs that no worker runs and no tool re-sends on its own: crash-looping (`crash_loop_q`: the
    next delivery parks it) or parked already (`parked_q`). What the claim excludes, what the fairness rule does
    not count as waiting, and what the overview counts as "crash-looping or parked" and the doctor as
    `crash_loop`."""
    return Q(status=JobStatus.IN_PROGRESS) & (crash_loop_q(now=now) | parked_q())


def lease_claim(
    job_id: UUID | str, *, worker: str = "", ttl: int | None = None, fair_to: UUID | None = None
) -> uuid.UUID | None:
    """Take the lease if the job is IN_PROGRESS and its lease is absent or expired; count the attempt.

    Every claim obeys the fleet's DRS budget (DRS_MAX_IN_FLIGHT, `in_flight_rule`): at the budget, no job is
    claimed. With `fair_to` (the job's organization id) the claim also obeys the fairness rule (JOB_ORG_FAIR_SHARE):
    below its share, or with nobody else waiting, in the claiming UPDATE itself (one statement, the common
    case); at its share, only while no organization running fewer generations has a job waiting
    (`poorer_organization_waiting`). Never claims a crash-looping or parked job (`crash_looping_or_parked_q`).
    Returns the new lease token, or None when another delivery holds it, the job is not IN_PROGRESS, it is
    crash-looping or parked, or a rule holds it back (`lease_free`: True for the last alone). A connection dropped
    during a claim raises DeliveryNotStarted unless the claim committed (`_claim`); other database errors
    propagate: the caller fails closed and the message is redelivered.
    """
    share = settings.JOB_ORG_FAIR_SHARE if fair_to is not None else 0
    if fair_to is None or share <= 0:
        return _claim(job_id, worker=worker, ttl=ttl)
    token = _claim(job_id, worker=worker, ttl=ttl, fair_to=fair_to, share=share)
    if token is None and lease_free(job_id) and not poorer_organization_waiting(fair_to, now=timezone.now()):
        token = _claim(job_id, worker=worker, ttl=ttl)
    return token


# The key of the transaction-level advisory lock every budgeted claim takes (an arbitrary constant: "DRS").
IN_FLIGHT_LOCK_KEY = 0x445253


def in_flight_rule(budget: int, *, now: datetime) -> Q:
    """The claiming UPDATE's condition for the fleet's DRS budget: fewer than `budget` generations run (hold
    a live lease) across every worker. A running generation counts whether it is in its DRS phase or not: a
    generation spends almost all of its run there, and counting it from its claim to its release leaves no
    window in which a delivery that keeps its lease calls DRS uncounted. Not counted: a call whose delivery
    was handed back mid-call (a stopping worker) and is still waiting on it, and an invocation given up on
    our side that Lambda still runs. (OFFSET budget-1 LIMIT 1: no count of them all.)"""
    return ~Q(Exists(running_jobs(now).order_by()[budget - 1 : budget]))


def in_flight_budget_reached(*, now: datetime | None = None) -> bool:
    """True when the fleet runs DRS_MAX_IN_FLIGHT generations (or more): a claim now is held back."""
    budget = settings.DRS_MAX_IN_FLIGHT
    return budget > 0 and running_jobs(now or timezone.now()).order_by()[budget - 1 : budget].exists()


def in_flight_free(*, now: datetime | None = None) -> int | None:
    """How many more generations the fleet's DRS budget admits now (0 at or over it); None when it is off."""
    budget = int(settings.DRS_MAX_IN_FLIGHT)
    if budget <= 0:
        return None
    running: int = running_jobs(now or timezone.now()).order_by()[:budget].count()
    return max(0, budget - running)


def lease_park(job_id: UUID | str, *, worker: str = "", final_receive: bool = False) -> bool:
    """Park the job instead of claiming it, in one conditional UPDATE: when it is IN_PROGRESS with no live
    lease and crash-looping (what it does may be what kills its workers), or, with `final_receive`, whatever its
    record (its message would reach the DLQ at its next receive). A parked job holds no lease, runs nothing, and
    its message is acknowledged; only an operator puts it back to work (`job_requeue` naming it) or ends it.
    True when this delivery parked it."""
    now = timezone.now()
    parkable = (
        AsyncJob.objects.filter(id=job_id, status=JobStatus.IN_PROGRESS)
        .exclude(parked_q())
        .filter(lease_free_q(now=now))
    )
    if not final_receive:
        parkable = parkable.filter(crash_loop_q(now=now))
    with transaction.atomic():
        parked = parkable.update(
            parked_at=now,
            lease_token=None,
            lease_expires_at=None,
            lost_deliveries=F("lost_deliveries") + Case(When(lease_token__isnull=False, then=1), default=0),
            updated_at=now,
        )
        if parked:
            job = AsyncJob.objects.get(id=job_id)
            why = (
                f"its last {job.lost_deliveries} deliveries died without an outcome"
                if job.lost_deliveries >= CRASH_LOOP_LOST_DELIVERIES
                else "its message's last receive before the DLQ"
            )
            states.record(job_id, "parked", actor=worker, detail=f"parked, not run: {why}")
    return parked == 1


def _claim(
    job_id: UUID | str, *, worker: str, ttl: int | None, fair_to: UUID | None = None, share: int = 0
) -> uuid.UUID | None:
    """`_claim_as` with a new token. A connection that dies during the claim (a failover) leaves one question,
    answered by the job's row on a fresh connection: does it hold this token? Then the claim committed and is
    ours. Otherwise nothing was claimed, and the delivery has not started (DeliveryNotStarted: its message is
    made visible again at once, not after its visibility timeout)."""
    token = uuid.uuid4()
    try:
        return _claim_as(token, job_id, worker=worker, ttl=ttl, fair_to=fair_to, share=share)
    except DISCONNECTED as exc:
        if connection.in_atomic_block:
            raise
        connection.close()
        if retry_once_on_disconnect(lambda: AsyncJob.objects.filter(id=job_id, lease_token=token).exists()):
            return token
        raise DeliveryNotStarted(f"database unavailable at the claim: {type(exc).__name__}") from exc


def _claim_as(
    token: uuid.UUID, job_id: UUID | str, *, worker: str, ttl: int | None, fair_to: UUID | None, share: int
) -> uuid.UUID | None:
    """Claim with `token`; with `fair_to`, under the fairness rule at `share` (`share_rule`)."""
    budget = settings.DRS_MAX_IN_FLIGHT
    # The budget holds under concurrent claims from every process: each budgeted claim first takes one
    # transaction-level advisory lock, so the claiming UPDATE (its snapshot taken after the lock) sees every
    # claim committed before it, and no two claims count the same free place. The lock is held for the one
    # UPDATE only; releases need none (they only lower the count). SQLite has one writer at a time already.
    with transaction.atomic():
        if budget > 0 and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [IN_FLIGHT_LOCK_KEY])
        now = timezone.now()
        expires = now + timedelta(seconds=ttl or settings.JOB_LEASE_TTL_SECONDS)
        claimed = _CLAIM.execute(
            fixed={"budget": budget, "share": share if fair_to is not None else 0},
            job_id=as_uuid(job_id),
            token=token,
            now=now,
            expires=expires,
            fair_to=as_uuid(fair_to),
        )
    if claimed != 1:
        return None
    # The expiry goes into the history: when this delivery's worker dies, the job's waterfall draws it up to here.
    states.record(job_id, "lease_claimed", actor=worker, detail=f"lease until {expires:%Y-%m-%dT%H:%M:%S.%fZ}")
    return token


def _claim_sql(
    *, budget: int, share: int, job_id: UUID, token: UUID, now: datetime, expires: datetime, fair_to: UUID | None
) -> tuple[str, Any]:
    """The claiming UPDATE (compiled once per shape: serenity/compiled.py)."""
    claimable = (
        AsyncJob.objects.filter(id=job_id, status=JobStatus.IN_PROGRESS)
        .filter(lease_free_q(now=now))
        .exclude(crash_looping_or_parked_q(now=now))  # parked instead (`lease_park`), never run
    )
    if fair_to is not None:
        claimable = claimable.filter(share_rule(fair_to, share=share, now=now))
    if budget > 0:
        claimable = claimable.filter(in_flight_rule(budget, now=now))
    return update_sql(
        claimable,
        lease_token=token,
        lease_expires_at=expires,
        lease_epoch=F("lease_epoch") + 1,
        attempts=F("attempts") + 1,
        # Taking over an expired lease: the delivery that held it died without an outcome.
        lost_deliveries=F("lost_deliveries") + Case(When(lease_token__isnull=False, then=1), default=0),
        updated_at=now,
        started_at=Coalesce(F("started_at"), Value(now)),
    )


_CLAIM = Compiled(_claim_sql)


def running_q(now: datetime) -> Q:
    """IN_PROGRESS under a live lease (stuck or not): a generation the fleet's DRS budget counts."""
    return Q(status=JobStatus.IN_PROGRESS) & lease_live_q(now=now)


def running_jobs(now: datetime) -> QuerySet[AsyncJob]:
    """Jobs running a generation: IN_PROGRESS under a live lease."""
    return AsyncJob.objects.filter(running_q(now))


def waiting_jobs(now: datetime) -> QuerySet[AsyncJob]:
    """Jobs waiting for a worker, as the fairness rule counts them: IN_PROGRESS, no live lease, their message out
    and receivable by now (not a retry or a held-back delivery still in its delay), and neither crash-looping nor
    parked (`crash_looping_or_parked_q`: the next delivery parks the one, nothing runs the other)."""
    return (
        AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS, message_sent_at__isnull=False)
        .filter(lease_free_q(now=now))
        .filter(Q(runnable_at__isnull=True) | Q(runnable_at__lte=now))
        .exclude(crash_looping_or_parked_q(now=now))
    )


def share_rule(organization_id: UUID, *, share: int, now: datetime) -> Q:
    """The claiming UPDATE's condition: the organization runs fewer than `share` generations, or no job of
    another organization is waiting. Claims of one organization racing at the same instant each count only
    the others' committed leases, so the share can be passed by the few that race; the next claims see it."""
    # At the share: a `share`-th running generation exists (OFFSET share-1 LIMIT 1: no count of them all).
    at_share = Exists(running_jobs(now).filter(organization_id=organization_id).order_by()[share - 1 : share])
    others_waiting = Exists(waiting_jobs(now).exclude(organization_id=organization_id))
    return ~at_share | ~others_waiting


def poorer_organization_waiting(organization_id: UUID, *, now: datetime) -> bool:
    """True when another organization running fewer generations than this one has a job waiting: then this
    one, at its share, waits. Organizations above their share with as many running as each other all go on,
    so every worker stays busy when every organization has work (the shares even out as jobs end)."""
    mine = running_jobs(now).filter(organization_id=organization_id).count()
    others = list(
        waiting_jobs(now)
        .exclude(organization_id=organization_id)
        .order_by()
        .values_list("organization_id", flat=True)
        .distinct()[:1000]
    )
    theirs = dict(
        running_jobs(now)
        .filter(organization_id__in=others)
        .order_by()
        .values("organization_id")
        .annotate(n=Count("id"))
        .values_list("organization_id", "n")
    )
    return any(theirs.get(org, 0) < mine for org in others)


def lease_free(job_id: UUID | str) -> bool:
    """True when a claim could take the job but for a rule: IN_PROGRESS, nobody holds its lease, and neither
    crash-looping nor parked. After a failed claim: a rule (fairness, the DRS budget) held it back, rather than
    another delivery holding it or parking it."""
    now = timezone.now()
    free = AsyncJob.objects.filter(lease_free_q(now=now), id=job_id, status=JobStatus.IN_PROGRESS)
    return free.exclude(crash_looping_or_parked_q(now=now)).exists()


def job_parked(job_id: UUID | str) -> bool:
    """True when the job is IN_PROGRESS and parked (`parked_q`)."""
    return AsyncJob.objects.filter(parked_q(), id=job_id, status=JobStatus.IN_PROGRESS).exists()


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
    released = AsyncJob.objects.filter(lease_expired_q(now=now), id=job_id, status=JobStatus.IN_PROGRESS).update(
        lease_token=None, lease_expires_at=None, lost_deliveries=F("lost_deliveries") + 1, updated_at=now
    )
    if released:
        states.record(job_id, "lease_released", actor=actor, detail="stale lease released")
    return released == 1
