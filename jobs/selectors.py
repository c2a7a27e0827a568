"""Reads over async jobs, shared by the admin, the runbook commands, the doctor, the probe and the sweeper.

Nothing here writes, and nothing here formats for display (see jobs/display.py). "Activity" is the later
of `updated_at` (every claim, checkpoint, release and status change touches it) and `message_sent_at`
(every publish sets it), so a job an operator just re-enqueued is not "quiet" again until the threshold
passes once more: that is what makes the runbooks safe to run twice.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypedDict
from uuid import UUID

from django.conf import settings
from django.db.models import Case, CharField, Count, Exists, Min, Q, QuerySet, Value, When
from django.db.models.functions import Coalesce, Greatest, TruncHour
from django.utils import timezone
from django_stubs_ext import WithAnnotations

from jobs import retries
from jobs.codes import NEEDS_REAUTH
from jobs.leases import (
    crash_looping,
    crash_looping_or_parked_q,
    lease_expired_q,
    lease_free_q,
    lease_live_q,
    lost_in_a_row,
    parked_q,
    running_jobs,
    running_q,
)
from jobs.models import AsyncJob, JobEvent, JobStatus, WorkerHeartbeat
from tokens.models import PromiseGrant

# A held lease whose job shows no activity for this many heartbeats: its worker is presumed dead (a running
# worker touches the job at every heartbeat).
SILENT_HEARTBEATS = 3
# A worker process whose heartbeat row is older than this many WORKER_HEARTBEAT_SECONDS is dead (a live one
# beats at every interval while its consumer loop turns; jobs/worker/heartbeats.py).
WORKER_SILENT_HEARTBEATS = 3


@dataclass(frozen=True)
class JobFilter:
    """The narrowing filters every runbook accepts; empty means "no narrowing"."""

    job_ids: tuple[UUID | str, ...] = ()
    status: str | None = None
    code: str | None = None

    @property
    def narrows(self) -> bool:
        return bool(self.job_ids or self.status or self.code)


class Activity(TypedDict):
    """What `with_activity` adds to each job."""

    last_activity_at: datetime


def with_activity(qs: "QuerySet[AsyncJob]") -> "QuerySet[WithAnnotations[AsyncJob, Activity]]":
    """Annotate `last_activity_at`: the later of the last row change and the last message sent."""
    return qs.annotate(last_activity_at=Greatest("updated_at", Coalesce("message_sent_at", "updated_at")))


def quiet_q(seconds: float, *, now: datetime | None = None) -> Q:
    """IN_PROGRESS jobs with no activity for `seconds` (on a queryset annotated by `with_activity`)."""
    now = now or timezone.now()
    return Q(status=JobStatus.IN_PROGRESS, last_activity_at__lte=now - timedelta(seconds=seconds))


def budget_binding_at() -> int:
    """How many generations in flight make the fleet's DRS budget bind: DRS_MAX_IN_FLIGHT less a tenth of it. A place
    freed in a budget that binds is taken within a receive, so the count hovers just under the budget; a job
    waiting then waits for a place, not for a lost message. 0: no budget."""
    budget = int(settings.DRS_MAX_IN_FLIGHT)
    return max(0, budget - budget // 10)


def budget_binding_q(*, now: datetime | None = None) -> Q:
    """True for every row while the fleet's DRS budget binds (`budget_binding_at` generations hold a live lease);
    never without a budget. OFFSET n-1 LIMIT 1: no count of them all."""
    binding_at = budget_binding_at()
    if binding_at <= 0:
        return Q(pk__isnull=True)
    return Q(Exists(running_jobs(now or timezone.now()).order_by()[binding_at - 1 : binding_at]))


def budget_wait_q(*, now: datetime | None = None) -> Q:
    """IN_PROGRESS jobs waiting for a place in the fleet's DRS budget: no live lease, their message out and
    receivable by now (on the queue, left unreceived by the workers' intake, or held back by a claim), neither
    crash-looping nor parked, while the budget binds (`budget_binding_q`). Waiting, not stuck: never a finding,
    never counted stuck, never re-sent by a tool."""
    now = now or timezone.now()
    return (
        Q(status=JobStatus.IN_PROGRESS, message_sent_at__isnull=False)
        & lease_free_q(now=now)
        & (Q(runnable_at__isnull=True) | Q(runnable_at__lte=now))
        & ~crash_looping_or_parked_q(now=now)
        & budget_binding_q(now=now)
    )


def delay_wait_q(*, now: datetime | None = None) -> Q:
    """IN_PROGRESS jobs waiting out a delay: no live lease, their last message delayed past `now` (a throttle's
    Retry-After, a retry's backoff, a held-back delivery). Waiting, not stuck, whatever their phase."""
    now = now or timezone.now()
    return (
        Q(status=JobStatus.IN_PROGRESS, message_sent_at__isnull=False, runnable_at__gt=now)
        & lease_free_q(now=now)
        & ~parked_q()
    )


def waiting_not_stuck_q(*, now: datetime | None = None) -> Q:
    """Jobs waiting for a budget place or out a delay (`budget_wait_q`, `delay_wait_q`)."""
    return budget_wait_q(now=now) | delay_wait_q(now=now)


def stuck_q(*, now: datetime | None = None) -> Q:
    """What the probe counts as stuck: quiet for JOB_STUCK_AFTER_SECONDS (needs `with_activity`), unless waiting for
    a budget place or out a delay (`waiting_not_stuck_q`)."""
    return quiet_q(settings.JOB_STUCK_AFTER_SECONDS, now=now) & ~waiting_not_stuck_q(now=now)


def presumed_dead_q(*, now: datetime | None = None) -> Q:
    """A held lease on a job quiet for SILENT_HEARTBEATS heartbeats: its worker is presumed dead, though the
    lease cannot safely be taken before it expires (needs `with_activity`)."""
    return lease_live_q(now=now) & quiet_q(SILENT_HEARTBEATS * settings.JOB_HEARTBEAT_SECONDS, now=now)


@dataclass(frozen=True)
class Deliveries:
    """How a job's deliveries went, as every operator view reports it: the job page, `job_inspect`, the doctor,
    the redrive, `job_requeue_stuck` and the display read these counts here. The crash-loop rule itself is
    jobs/leases.py's (`crash_looping`, and `crash_looping_or_parked_q` for the overview's counts)."""

    attempts: int  # deliveries that claimed the job since it was last put back to work
    max_attempts: int  # JOB_MAX_ATTEMPTS
    # Deliveries in a row that ended without an outcome, counting the one whose lease has expired but was not
    # yet taken over (its worker died too).
    lost: int
    parked: bool = False  # a delivery parked it instead of running it (jobs/leases.py `lease_park`)
    # Its deliveries keep dying (jobs/leases.py `crash_looping`): decided from the job's own record, wherever its
    # message happens to be.
    crash_looping: bool = False

    @property
    def crash_looping_or_parked(self) -> bool:
        """No worker runs it and no tool re-sends it unless an operator names it (`--job`)."""
        return self.crash_looping or self.parked

    @property
    def attempts_spent(self) -> bool:
        """Every attempt is used: the next delivery to claim it ends it FAILED RETRIES_EXHAUSTED at once, without
        running it (jobs/retries.py); `job_rerun` puts it back to work with a fresh budget once it has."""
        return retries.budget_spent_before_run(self.attempts + 1)


def deliveries(job: AsyncJob, *, now: datetime | None = None) -> Deliveries:
    """`job`'s delivery counts at `now` (its row alone: no query)."""
    now = now or timezone.now()
    return Deliveries(
        attempts=job.attempts,
        max_attempts=settings.JOB_MAX_ATTEMPTS,
        lost=lost_in_a_row(job, now=now),
        parked=job.parked_at is not None,
        crash_looping=crash_looping(job, now=now),
    )


def worker_ttl() -> timedelta:
    """How old a worker's heartbeat may be while the worker still counts as alive."""
    return timedelta(seconds=WORKER_SILENT_HEARTBEATS * settings.WORKER_HEARTBEAT_SECONDS)


def _consumers_of(queue: str) -> "QuerySet[WorkerHeartbeat]":
    return WorkerHeartbeat.objects.filter(queues__contains=f",{queue},")


def workers_alive(queue: str, *, now: datetime | None = None) -> int:
    """Worker processes consuming `queue` whose heartbeat is younger than `worker_ttl()`."""
    now = now or timezone.now()
    return _consumers_of(queue).filter(beat_at__gt=now - worker_ttl()).count()


def worker_last_seen(queue: str) -> WorkerHeartbeat | None:
    """The most recent heartbeat of any worker that consumed `queue` (alive or not), or None."""
    return _consumers_of(queue).order_by("-beat_at").first()


def jobs_filtered(filters: JobFilter = JobFilter(), qs: "QuerySet[AsyncJob] | None" = None) -> "QuerySet[AsyncJob]":
    qs = AsyncJob.objects.all() if qs is None else qs
    if filters.job_ids:
        qs = qs.filter(id__in=filters.job_ids)
    if filters.status:
        qs = qs.filter(status=filters.status)
    if filters.code:
        qs = qs.filter(error_code=filters.code)
    return qs


def jobs_with_stale_lease(
    *, expired_for: timedelta = timedelta(0), filters: JobFilter = JobFilter(), now: datetime | None = None
) -> "QuerySet[AsyncJob]":
    """IN_PROGRESS jobs whose lease expired at least `expired_for` ago (their worker is gone)."""
    now = now or timezone.now()
    qs = AsyncJob.objects.filter(lease_expired_q(now=now - expired_for), status=JobStatus.IN_PROGRESS)
    return jobs_filtered(filters, qs).order_by("lease_expires_at", "id")


def jobs_stuck(
    *, quiet_for: timedelta, filters: JobFilter = JobFilter(), now: datetime | None = None
) -> "QuerySet[WithAnnotations[AsyncJob, Activity]]":
    """IN_PROGRESS jobs with no live lease and no activity for at least `quiet_for`, but for those waiting for a
    budget place or out a delay (`waiting_not_stuck_q`) unless named by id: a tool never re-sends a waiting job."""
    now = now or timezone.now()
    qs = AsyncJob.objects.filter(lease_free_q(now=now), status=JobStatus.IN_PROGRESS)
    if not filters.job_ids:
        qs = qs.exclude(waiting_not_stuck_q(now=now))
    return (
        with_activity(jobs_filtered(filters, qs))
        .filter(quiet_q(quiet_for.total_seconds(), now=now))
        .order_by("last_activity_at", "id")
    )


def jobs_expired(
    *, expired_for: timedelta = timedelta(0), filters: JobFilter = JobFilter(), now: datetime | None = None
) -> "QuerySet[AsyncJob]":
    """Job records past their expiry (`expires_at`: JOB_RECORD_TTL_DAYS after it was created or last put back to
    work) by at least `expired_for`, whatever their status."""
    now = now or timezone.now()
    return jobs_filtered(filters, AsyncJob.objects.filter(expires_at__lte=now - expired_for)).order_by(
        "expires_at", "id"
    )


def grants_orphaned() -> "QuerySet[PromiseGrant]":
    """Grants whose job no longer exists (a job row deleted without its grant)."""
    return PromiseGrant.objects.exclude(job_id__in=AsyncJob.objects.values("id")).order_by("created_at")


def job_events(job_id: UUID) -> list[JobEvent]:
    return list(JobEvent.objects.filter(job_id=job_id).order_by("at", "id"))


@dataclass(frozen=True)
class ProbeCounts:
    stuck_in_progress: int
    needs_reauth_backlog: int
    workers_alive: int
    in_flight: int = 0  # generations under a live lease: what DRS_MAX_IN_FLIGHT bounds
    budget_waiting: int = 0  # jobs waiting for a budget place (`budget_wait_q`)
    # Of those, the ones quiet past the stuck threshold: stuck after all when the queue holds nothing for them.
    budget_waiting_quiet: int = 0
    oldest_budget_wait_seconds: int = 0
    # The budget full and no job ended for a whole delivery budget: every running delivery hangs.
    budget_stalled: bool = False


def probe_counts(*, stuck_after: int | None = None, now: datetime | None = None) -> ProbeCounts:
    """Two queries: jobs IN_PROGRESS with no activity for longer than `stuck_after` seconds
    (JOB_STUCK_AFTER_SECONDS: the lease TTL plus the longest retry delay), whatever their age, and
    unexpired jobs FAILED awaiting re-authorisation. Activity is a claim, a checkpoint, a heartbeat or a
    message sent: a job just recovered is not counted again, a long-lived but busy one is not counted.
    Then the worker processes alive on the market-jobs queue (their heartbeats).

    Every job type counts: the market-jobs queue carries generation jobs only. Raises DatabaseError.
    """
    now = now or timezone.now()
    stuck_after = settings.JOB_STUCK_AFTER_SECONDS if stuck_after is None else stuck_after
    counts = with_activity(AsyncJob.objects.all()).aggregate(
        stuck=Count("id", filter=quiet_q(stuck_after, now=now) & ~waiting_not_stuck_q(now=now)),
        reauth=Count("id", filter=Q(status=JobStatus.FAILED, error_code=NEEDS_REAUTH, expires_at__gt=now)),
        in_flight=Count("id", filter=running_q(now)),
        budget_waiting=Count("id", filter=budget_wait_q(now=now)),
        budget_waiting_quiet=Count(
            "id", filter=quiet_q(stuck_after, now=now) & budget_wait_q(now=now) & ~delay_wait_q(now=now)
        ),
        budget_waiting_since=Min(Coalesce("runnable_at", "message_sent_at"), filter=budget_wait_q(now=now)),
    )
    since = counts["budget_waiting_since"]
    budget = int(settings.DRS_MAX_IN_FLIGHT)
    full = budget > 0 and counts["in_flight"] >= budget
    window = now - timedelta(seconds=settings.JOB_TASK_TIME_LIMIT_SECONDS)
    return ProbeCounts(
        stuck_in_progress=counts["stuck"],
        needs_reauth_backlog=counts["reauth"],
        workers_alive=workers_alive(settings.MARKET_JOBS_QUEUE, now=now),
        in_flight=counts["in_flight"],
        budget_waiting=counts["budget_waiting"],
        budget_waiting_quiet=counts["budget_waiting_quiet"],
        oldest_budget_wait_seconds=max(0, int((now - since).total_seconds())) if since else 0,
        budget_stalled=full and not AsyncJob.objects.filter(ended_at__gt=window).exists(),
    )


def unsent_jobs(*, grace_seconds: int | None = None) -> "QuerySet[AsyncJob]":
    """IN_PROGRESS jobs whose message never went out (or whose re-send failed), past the grace period, with
    no lease: a crash between commit and send."""
    cutoff = timezone.now() - timedelta(
        seconds=settings.JOB_ENQUEUE_GRACE_SECONDS if grace_seconds is None else grace_seconds
    )
    return AsyncJob.objects.filter(
        status=JobStatus.IN_PROGRESS, message_sent_at__isnull=True, lease_token__isnull=True, updated_at__lte=cutoff
    ).order_by("created_at")


# --- the operator overview (jobs/admin/) --------------------------------------------------------------------------

# How a finished job ended, as the overview charts it; each name is also the admin's `outcome` filter.
OUTCOMES = {
    "completed": Q(status=JobStatus.COMPLETED),
    "failed": Q(status=JobStatus.FAILED) & ~Q(error_code=NEEDS_REAUTH),
    "needs_reauth": Q(status=JobStatus.FAILED, error_code=NEEDS_REAUTH),
    "cancelled": Q(status=JobStatus.CANCELLED),
}
JOB_STATES = ("running", "waiting", "stuck", "awaiting_reauth")


def job_state_q(state: str, *, now: datetime | None = None) -> Q:
    """Jobs `running` (a live lease, not stuck), `waiting` (no live lease, not stuck: queued, or between
    retries), `stuck` (what the probe counts) or `awaiting_reauth` (FAILED NEEDS_REAUTH, not expired). The first
    three need `with_activity`; the four never overlap."""
    now = now or timezone.now()
    if state == "running":
        return Q(status=JobStatus.IN_PROGRESS) & lease_live_q(now=now) & ~stuck_q(now=now)
    if state == "waiting":
        return Q(status=JobStatus.IN_PROGRESS) & lease_free_q(now=now) & ~stuck_q(now=now)
    if state == "stuck":
        return stuck_q(now=now)
    if state == "awaiting_reauth":
        return Q(status=JobStatus.FAILED, error_code=NEEDS_REAUTH, expires_at__gt=now)
    raise ValueError(f"unknown job state {state!r}")


def job_state_counts(*, now: datetime | None = None) -> dict[str, int]:
    """How many jobs are in each of JOB_STATES now: one query."""
    now = now or timezone.now()
    return with_activity(AsyncJob.objects.all()).aggregate(
        **{state: Count("id", filter=job_state_q(state, now=now)) for state in JOB_STATES}
    )


def waiting_for_a_worker_q(*, now: datetime | None = None) -> Q:
    """IN_PROGRESS jobs no worker runs whose message can be received now (not a retry or a held-back delivery
    still in its delay): what a worker would take next. Stuck jobs included, crash-looping ones too (the worker
    that takes one parks it); parked ones not (their message is deleted: only an operator sends them again)."""
    now = now or timezone.now()
    return (
        Q(status=JobStatus.IN_PROGRESS)
        & ~parked_q()
        & lease_free_q(now=now)
        & (Q(runnable_at__isnull=True) | Q(runnable_at__lte=now))
    )


def waiting_since() -> Case:
    """Since when a job of `waiting_for_a_worker_q` waits: the expiry of the lease its dead worker left, else
    the moment its last message became receivable (the sending, for a message never delayed)."""
    return Case(
        When(lease_token__isnull=False, then="lease_expires_at"),
        default=Coalesce("runnable_at", "message_sent_at", "updated_at"),
    )


@dataclass(frozen=True)
class LiveWork:
    """The overview's live figures, from the job table: what `job_state_counts` counts, and the jobs that no
    worker runs until an operator names them."""

    states: dict[str, int]
    crash_looping_or_parked: int  # jobs/leases.py `crash_looping_or_parked_q`
    parked: int = 0  # of those, the ones a delivery parked (`parked_q`)
    in_flight: int = 0  # IN_PROGRESS under a live lease, stuck or not: what the fleet's DRS budget counts
    budget_waiting: int = 0  # jobs waiting for a place in it (`budget_wait_q`): waiting, not stuck

    @property
    def in_progress(self) -> int:
        """Every IN_PROGRESS job (awaiting re-authorisation is FAILED)."""
        return sum(self.states[state] for state in ("running", "waiting", "stuck"))


def live_work(*, now: datetime | None = None) -> LiveWork:
    """`LiveWork` at `now`: one query."""
    now = now or timezone.now()
    counts = with_activity(AsyncJob.objects.all()).aggregate(
        **{state: Count("id", filter=job_state_q(state, now=now)) for state in JOB_STATES},
        crash_looping_or_parked=Count("id", filter=crash_looping_or_parked_q(now=now)),
        parked=Count("id", filter=Q(status=JobStatus.IN_PROGRESS) & parked_q()),
        in_flight=Count("id", filter=running_q(now)),
        budget_waiting=Count("id", filter=budget_wait_q(now=now)),
    )
    return LiveWork(
        states={state: counts[state] for state in JOB_STATES},
        crash_looping_or_parked=counts["crash_looping_or_parked"],
        parked=counts["parked"],
        in_flight=counts["in_flight"],
        budget_waiting=counts["budget_waiting"],
    )


def oldest_waiting(*, now: datetime | None = None) -> tuple[UUID, datetime] | None:
    """`(job id, waiting since)` of the job that has waited longest for a worker (`waiting_for_a_worker_q`), or
    None: one query."""
    now = now or timezone.now()
    row = (
        AsyncJob.objects.filter(waiting_for_a_worker_q(now=now))
        .annotate(since=waiting_since())
        .order_by("since", "id")
        .values_list("id", "since")
        .first()
    )
    return (row[0], row[1]) if row else None


def outcomes_per_hour(*, since: datetime) -> dict[tuple[datetime, str], int]:
    """`{(hour, outcome): count}` of the jobs that ended since `since`, by the hour they (last) ended: one
    query. A job counts once, by its latest ending (a re-authorised job that then completed is `completed`)."""
    outcome = Case(*(When(q, then=Value(name)) for name, q in OUTCOMES.items()), output_field=CharField())
    rows = (
        AsyncJob.objects.filter(ended_at__gte=since)
        .exclude(status=JobStatus.IN_PROGRESS)
        .annotate(hour=TruncHour("ended_at"), outcome=outcome)
        .values("hour", "outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(row["hour"], row["outcome"]): row["n"] for row in rows}


def organizations_waiting(*, limit: int = 10, now: datetime | None = None) -> list[tuple[str, int]]:
    """`[(organization id, waiting jobs)]`, the most first: one query."""
    rows = (
        with_activity(AsyncJob.objects.all())
        .filter(job_state_q("waiting", now=now))
        .values("organization_id")
        .annotate(n=Count("id"))
        .order_by("-n", "organization_id")[:limit]
    )
    return [(str(row["organization_id"]), row["n"]) for row in rows]


def heartbeat_retention() -> timedelta:
    """How long the row of a silent worker is kept (shown dead on the overview) before the purge deletes it:
    WORKER_HEARTBEAT_RETENTION_SECONDS, and never less than `worker_ttl()` (a row is dead before it goes)."""
    return max(timedelta(seconds=settings.WORKER_HEARTBEAT_RETENTION_SECONDS), worker_ttl())


def heartbeats_silent(*, now: datetime | None = None) -> "QuerySet[WorkerHeartbeat]":
    """The rows of workers silent for longer than the retention window (`heartbeat_retention`): nobody needs to
    know about them any more. Oldest first."""
    now = now or timezone.now()
    return WorkerHeartbeat.objects.filter(beat_at__lt=now - heartbeat_retention()).order_by("beat_at")


def workers_seen(*, now: datetime | None = None) -> list[WorkerHeartbeat]:
    """Every worker process that beat within the retention window (`heartbeat_retention`), the most recent beat
    first: one query, bounded by the processes that ran in that window."""
    now = now or timezone.now()
    return list(WorkerHeartbeat.objects.filter(beat_at__gte=now - heartbeat_retention()).order_by("-beat_at", "worker"))


@dataclass(frozen=True)
class Fleet:
    """The worker processes alive now on each queue, and how many of those missed their last beat (alive still,
    but a worker that was just killed looks exactly like that for WORKER_SILENT_HEARTBEATS beats)."""

    alive: int  # on the market-jobs queue
    late: int  # of `alive`, silent for more than one and a half beats
    maintenance_alive: int


def fleet(rows: list[WorkerHeartbeat], *, now: datetime | None = None) -> Fleet:
    """`Fleet` at `now` from heartbeat rows (`workers_seen`), by the rule of `workers_alive`; no query."""
    now = now or timezone.now()
    alive = [row for row in rows if row.beat_at > now - worker_ttl()]
    on_jobs = [row for row in alive if settings.MARKET_JOBS_QUEUE in row.queue_names]
    late_after = timedelta(seconds=1.5 * settings.WORKER_HEARTBEAT_SECONDS)
    return Fleet(
        alive=len(on_jobs),
        late=sum(now - row.beat_at > late_after for row in on_jobs),
        maintenance_alive=sum(settings.MAINTENANCE_QUEUE in row.queue_names for row in alive),
    )
