"""Job leases (jobs/leases.py) on real rows: each lease state and the predicates that recognise it, the claim
(a free job, a live lease, an expired one taken over, racing claims), the fence a stale token meets, the
release, the park and the operator's release of a stale lease."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import states
from jobs.leases import (
    crash_loop_q,
    crash_looping,
    lease_claim,
    lease_expired_q,
    lease_free,
    lease_free_q,
    lease_live_q,
    lease_park,
    lease_release,
    lease_release_stale,
    lease_state_q,
)
from jobs.models import AsyncJob, JobEvent, JobStatus, LeaseState, default_expires_at
from tests.jobs.conftest import leased
from tests.jobs.factories import AsyncJobFactory

PREDICATES = {"live": lease_live_q, "free": lease_free_q, "expired": lease_expired_q}


def row(job: AsyncJob) -> dict:
    """Every column of the job's row as stored."""
    return AsyncJob.objects.filter(id=job.id).values().get()


def history(job: AsyncJob) -> list[tuple[str, str, str]]:
    return list(JobEvent.objects.filter(job_id=job.id).values_list("kind", "actor", "detail"))


def expire(job: AsyncJob) -> None:
    """What a delivery that died holding the lease leaves once its TTL has passed: the token, its expiry behind."""
    AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def until(expires) -> str:
    """The detail of a `lease_claimed` event."""
    return f"lease until {expires:%Y-%m-%dT%H:%M:%S.%fZ}"


# --- Each lease state, reached as the product reaches it, and the predicates that recognise it ----------------


def never_claimed() -> AsyncJob:
    return AsyncJobFactory()


def claimed() -> AsyncJob:
    job = AsyncJobFactory()
    assert lease_claim(job.id) is not None
    return job


def claimed_then_expired() -> AsyncJob:
    job = claimed()
    expire(job)
    return job


def claimed_then_released() -> AsyncJob:
    job = AsyncJobFactory()
    assert lease_release(job.id, lease_claim(job.id), reason="retry later") is True
    return job


def claimed_then_completed() -> AsyncJob:
    job = AsyncJobFactory()
    assert states.transition(job.id, to=JobStatus.COMPLETED, lease_token=lease_claim(job.id), event="completed")
    return job


@pytest.mark.parametrize(
    ("reach", "state", "predicates", "free_to_claim"),
    [
        (never_claimed, LeaseState.NONE, {"free"}, True),
        (claimed_then_released, LeaseState.NONE, {"free"}, True),
        (claimed_then_completed, LeaseState.NONE, {"free"}, False),  # no lease, but nothing left to run
        (claimed, LeaseState.HELD, {"live"}, False),
        (claimed_then_expired, LeaseState.EXPIRED, {"free", "expired"}, True),
    ],
    ids=["never claimed", "released", "completed", "claimed", "expired"],
)
def test_each_lease_state_is_recognised_alike_by_the_row_and_by_the_filters(
    db, reach, state, predicates, free_to_claim
):
    job = reach()
    job.refresh_from_db()
    assert job.lease_state() == state
    assert {name for name, q in PREDICATES.items() if AsyncJob.objects.filter(q(), id=job.id).exists()} == predicates
    assert {s for s in LeaseState if AsyncJob.objects.filter(lease_state_q(s), id=job.id).exists()} == {state}
    assert lease_free(job.id) is free_to_claim


def test_a_lease_is_expired_from_the_very_instant_of_its_expiry(db):
    job = claimed()
    job.refresh_from_db()
    expiry, just_before = job.lease_expires_at, job.lease_expires_at - timedelta(microseconds=1)

    def matching(now):
        return {name for name, q in PREDICATES.items() if AsyncJob.objects.filter(q(now=now), id=job.id).exists()}

    assert (job.lease_state(just_before), matching(just_before)) == (LeaseState.HELD, {"live"})
    assert (job.lease_state(expiry), matching(expiry)) == (LeaseState.EXPIRED, {"free", "expired"})


def test_a_lease_state_filter_refuses_a_value_that_is_no_lease_state():
    with pytest.raises(ValueError):
        lease_state_q("taken")


# --- The claim ------------------------------------------------------------------------------------------------


def test_a_claim_on_a_free_job_takes_the_lease_for_one_ttl_and_counts_the_attempt(db, settings):
    job = AsyncJobFactory()
    record_expiry = job.expires_at
    token = lease_claim(job.id, worker="worker-1")
    assert isinstance(token, uuid.UUID)
    job.refresh_from_db()
    claimed_at = job.updated_at
    assert job.lease_token == token
    assert job.lease_expires_at == claimed_at + timedelta(seconds=settings.JOB_LEASE_TTL_SECONDS)
    assert (job.status, job.lease_epoch, job.attempts, job.lost_deliveries) == (JobStatus.IN_PROGRESS, 1, 1, 0)
    assert job.started_at == claimed_at
    assert job.expires_at == record_expiry  # the record's own expiry (default_expires_at) is not the lease's
    assert history(job) == [("lease_claimed", "worker-1", until(job.lease_expires_at))]


def test_a_claim_with_its_own_ttl_takes_the_lease_for_that_long(db):
    job = AsyncJobFactory()
    lease_claim(job.id, ttl=60)
    job.refresh_from_db()
    assert job.lease_expires_at == job.updated_at + timedelta(seconds=60)


def test_a_record_expires_its_ttl_in_days_after_it_was_created_or_put_back_to_work(settings):
    settings.JOB_RECORD_TTL_DAYS = 3
    at = timezone.now()
    assert default_expires_at(at) == at + timedelta(days=3)


def test_a_claim_on_a_live_lease_is_refused_and_changes_nothing(db):
    job = AsyncJobFactory()
    lease_claim(job.id, worker="worker-1")
    before = row(job)
    assert lease_claim(job.id, worker="worker-2") is None
    assert row(job) == before
    assert [kind for kind, _, _ in history(job)] == ["lease_claimed"]


def test_a_live_lease_refuses_a_second_claim_and_an_expired_one_is_taken_over(db):
    job = AsyncJobFactory()
    first = lease_claim(job.id)
    assert first is not None
    assert lease_claim(job.id) is None
    AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    second = lease_claim(job.id)
    assert second not in (None, first)
    job.refresh_from_db()
    assert job.lease_token == second and job.lease_epoch == 2


def test_taking_over_an_expired_lease_counts_the_lost_delivery_and_keeps_the_first_start(db, settings):
    job = AsyncJobFactory()
    first = lease_claim(job.id, worker="worker-1")
    job.refresh_from_db()
    first_started_at = job.started_at
    expire(job)
    second = lease_claim(job.id, worker="worker-2")
    assert second not in (None, first)
    job.refresh_from_db()
    assert (job.lease_token, job.lease_epoch, job.attempts, job.lost_deliveries) == (second, 2, 2, 1)
    assert job.lease_expires_at == job.updated_at + timedelta(seconds=settings.JOB_LEASE_TTL_SECONDS)
    assert job.started_at == first_started_at
    assert [(kind, actor) for kind, actor, _ in history(job)] == [
        ("lease_claimed", "worker-1"),
        ("lease_claimed", "worker-2"),
    ]


@pytest.mark.parametrize("status", sorted(states.TERMINAL))
def test_a_finished_job_is_never_claimed(db, status):
    job = AsyncJobFactory(status=status, ended_at=timezone.now())
    before = row(job)
    assert lease_claim(job.id) is None
    assert row(job) == before
    assert history(job) == []


def test_a_parked_job_is_never_claimed(db):
    job = AsyncJobFactory(parked_at=timezone.now())
    before = row(job)
    assert lease_claim(job.id) is None
    assert row(job) == before


def test_the_crash_loop_rule_reads_the_same_on_a_row_and_as_a_filter(db):
    now = timezone.now()
    jobs = {
        "never lost one": AsyncJobFactory(),
        "one lost": AsyncJobFactory(lost_deliveries=1),
        "one lost, a live lease": leased(expires_in=timedelta(minutes=5), lost_deliveries=1),
        "one lost, an expired lease": leased(expires_in=-timedelta(seconds=1), lost_deliveries=1),
        "an expired lease alone": leased(expires_in=-timedelta(seconds=1)),
        "two lost": AsyncJobFactory(lost_deliveries=2),
        "two lost, a live lease": leased(expires_in=timedelta(minutes=5), lost_deliveries=2),
    }
    by_rule = {name for name, job in jobs.items() if crash_looping(job, now=now)}
    by_filter = {
        name for name, job in jobs.items() if AsyncJob.objects.filter(crash_loop_q(now=now), id=job.id).exists()
    }
    assert by_rule == by_filter == {"one lost, an expired lease", "two lost", "two lost, a live lease"}


def test_a_crash_looping_job_is_not_claimed_but_parked(db):
    """One delivery lost already and the second's lease expired: taking it over would make two in a row."""
    job = leased(expires_in=-timedelta(seconds=1), lost_deliveries=1)
    before = row(job)
    assert lease_claim(job.id) is None
    assert row(job) == before
    assert lease_park(job.id, worker="worker-2") is True
    job.refresh_from_db()
    assert (job.status, job.lease_token, job.lease_expires_at, job.lost_deliveries) == (
        JobStatus.IN_PROGRESS,
        None,
        None,
        2,
    )
    assert job.parked_at == job.updated_at
    assert history(job) == [("parked", "worker-2", "parked, not run: its last 2 deliveries died without an outcome")]
    assert lease_park(job.id, worker="worker-3") is False  # parked once


def test_a_job_with_a_live_lease_is_never_parked_even_at_its_last_receive(db):
    job = leased(expires_in=timedelta(minutes=10), lost_deliveries=1)
    before = row(job)
    assert lease_park(job.id, final_receive=True) is False
    assert row(job) == before


def test_a_healthy_free_job_is_parked_only_at_its_last_receive(db):
    job = AsyncJobFactory()
    assert lease_park(job.id, worker="worker-1") is False
    assert lease_park(job.id, worker="worker-1", final_receive=True) is True
    job.refresh_from_db()
    assert (job.lost_deliveries, job.parked_at) == (0, job.updated_at)
    assert history(job) == [("parked", "worker-1", "parked, not run: its message's last receive before the DLQ")]


# --- The fence and the release --------------------------------------------------------------------------------


def test_after_a_takeover_the_stale_token_can_neither_release_nor_end_the_job(db):
    job = AsyncJobFactory()
    stale = lease_claim(job.id)
    expire(job)
    holder = lease_claim(job.id)
    before = row(job)
    assert lease_release(job.id, stale, reason="stale") is False
    assert states.transition(job.id, to=JobStatus.COMPLETED, lease_token=stale, event="completed") is False
    assert row(job) == before
    assert [kind for kind, _, _ in history(job)] == ["lease_claimed", "lease_claimed"]
    assert lease_release(job.id, holder, reason="done") is True  # the holder's own still goes through


def test_a_release_frees_the_job_ends_the_run_of_lost_deliveries_and_sets_its_fields(db):
    job = AsyncJobFactory()
    lease_claim(job.id)
    expire(job)
    token = lease_claim(job.id)  # took over: one lost delivery
    runnable_at = timezone.now() + timedelta(minutes=1)
    assert lease_release(job.id, token, reason="retry in 60 s", runnable_at=runnable_at) is True
    job.refresh_from_db()
    assert (job.status, job.lease_token, job.lease_expires_at, job.lost_deliveries, job.runnable_at) == (
        JobStatus.IN_PROGRESS,
        None,
        None,
        0,
        runnable_at,
    )
    assert job.lease_state() == LeaseState.NONE
    assert history(job)[-1] == ("lease_released", "", "retry in 60 s")
    assert lease_claim(job.id) is not None  # free again


def test_a_lease_released_once_cannot_be_released_again(db):
    job = AsyncJobFactory()
    token = lease_claim(job.id)
    assert lease_release(job.id, token) is True
    before = row(job)
    assert lease_release(job.id, token) is False
    assert row(job) == before
    assert [kind for kind, _, _ in history(job)] == ["lease_claimed", "lease_released"]


def test_an_operator_releases_an_expired_lease_and_counts_it_lost(db):
    job = leased(expires_in=-timedelta(seconds=1))
    assert lease_release_stale(job.id, actor="op") is True
    job.refresh_from_db()
    assert (job.lease_token, job.lease_expires_at, job.lost_deliveries) == (None, None, 1)
    assert history(job) == [("lease_released", "op", "stale lease released")]


def test_an_operator_never_releases_a_live_lease(db):
    job = leased(expires_in=timedelta(minutes=10))
    before = row(job)
    assert lease_release_stale(job.id, actor="op") is False
    assert row(job) == before
    assert history(job) == []


# --- Racing claims, on real threads and connections -----------------------------------------------------------


def race_claims(job: AsyncJob, n: int) -> list[uuid.UUID | None]:
    """`n` threads, each on its own connection, claiming the job at the same instant: what each claim returned."""
    barrier = threading.Barrier(n)
    tokens: list[uuid.UUID | None] = []

    def claim(worker: str) -> None:
        try:
            barrier.wait()
            tokens.append(lease_claim(job.id, worker=worker))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(f"worker-{i}",)) for i in range(n)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(tokens) == n, "a claim raised"
    return tokens


# With a DRS budget every claim first takes the fleet's advisory lock; without one the row lock alone decides.
BUDGETS = pytest.mark.parametrize("budget", [0, 900], ids=["row lock", "budget lock"])


@BUDGETS
def test_of_two_claims_racing_on_a_free_job_exactly_one_wins(transactional_db, settings, budget):
    settings.DRS_MAX_IN_FLIGHT = budget
    job = AsyncJobFactory()
    tokens = race_claims(job, 2)
    (winner,) = [token for token in tokens if token is not None]
    job.refresh_from_db()
    assert (job.lease_token, job.lease_epoch, job.attempts) == (winner, 1, 1)
    assert [kind for kind, _, _ in history(job)] == ["lease_claimed"]


@BUDGETS
def test_of_two_claims_racing_to_take_over_an_expired_lease_exactly_one_wins(transactional_db, settings, budget):
    settings.DRS_MAX_IN_FLIGHT = budget
    job = leased(expires_in=-timedelta(seconds=1))
    tokens = race_claims(job, 2)
    (winner,) = [token for token in tokens if token is not None]
    job.refresh_from_db()
    assert (job.lease_token, job.lease_epoch, job.attempts, job.lost_deliveries) == (winner, 1, 2, 1)
    assert [kind for kind, _, _ in history(job)] == ["lease_claimed"]
