"""The fleet's DRS budget at claim time (DRS_MAX_IN_FLIGHT): at the budget a delivery is held back without
spending an attempt, and claims racing on their own connections, on threads or in two processes, never pass it."""

import threading
import time
import uuid
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from jobs import services as job_services
from jobs.leases import lease_claim, running_jobs
from jobs.models import AsyncJob
from jobs.outcomes import Outcome
from tests import fleet
from tests.jobs.factories import AsyncJobFactory
from tests.jobs.test_fairness import assert_held_back

HELD_BACK_BUDGET = Outcome("held", "drs_budget")


def running(n: int) -> list[AsyncJob]:
    """`n` jobs of distinct organizations under a live lease."""
    return [
        AsyncJobFactory(
            organization_id=uuid.uuid4(),
            lease_token=uuid.uuid4(),
            attempts=1,
            lease_expires_at=timezone.now() + timedelta(minutes=10),
        )
        for _ in range(n)
    ]


def test_below_the_budget_a_delivery_claims(db, settings):
    settings.DRS_MAX_IN_FLIGHT = 3
    running(2)
    job = AsyncJobFactory(organization_id=uuid.uuid4())
    assert lease_claim(job.id, fair_to=job.organization_id) is not None


def test_at_the_budget_a_delivery_is_held_back_spends_no_attempt_and_is_sent_again_delayed(
    db, handler, queues, settings
):
    settings.DRS_MAX_IN_FLIGHT = 2
    settings.JOB_FAIR_HOLD_SECONDS = 30
    running(2)
    job = AsyncJobFactory(organization_id=uuid.uuid4(), message_sent_at=timezone.now())
    before = timezone.now()
    assert job_services.job_run(job.id, "testEcho") == HELD_BACK_BUDGET
    assert handler.calls == []
    assert_held_back(job, before, queues)


def test_an_expired_lease_does_not_count_against_the_budget(db, settings):
    settings.DRS_MAX_IN_FLIGHT = 1
    AsyncJobFactory(lease_token=uuid.uuid4(), attempts=1, lease_expires_at=timezone.now() - timedelta(seconds=1))
    job = AsyncJobFactory()
    assert lease_claim(job.id) is not None


def test_the_budget_off_claims_whatever_runs(db, settings):
    settings.DRS_MAX_IN_FLIGHT = 0
    running(5)
    job = AsyncJobFactory()
    assert lease_claim(job.id) is not None


def test_claims_racing_on_their_own_connections_never_pass_the_budget(transactional_db, settings):
    """Forty-eight claimers, each on its own database connection, released at once on 120 jobs (each job
    tried by two claimers, in opposite orders), under a budget of 25: exactly 25 are claimed in all, and
    exactly 25 run. Without the claim's lock the claims that race each count the same free places."""
    budget = 25
    settings.DRS_MAX_IN_FLIGHT = budget
    ids = [str(AsyncJobFactory(organization_id=uuid.uuid4()).id) for _ in range(120)]
    connection.close()
    claimed, lock = [0], threading.Lock()
    barrier = threading.Barrier(48)

    def claim_all(job_ids: list[str]) -> None:
        try:
            barrier.wait(60)
            won = sum(lease_claim(job_id, worker=f"t{threading.get_ident()}") is not None for job_id in job_ids)
            with lock:
                claimed[0] += won
        finally:
            connection.close()

    slices = [ids[n::24] for n in range(24)]
    threads = [threading.Thread(target=claim_all, args=(s,)) for s in slices]
    threads += [threading.Thread(target=claim_all, args=(list(reversed(s)),)) for s in slices]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert claimed[0] == budget
    assert running_jobs(timezone.now()).count() == budget
    assert AsyncJob.objects.filter(attempts=1).count() == budget


def test_claims_racing_from_two_processes_never_pass_the_budget(transactional_db):
    """Two OS processes of eight threads each, started at the same moment, every thread trying all 60 jobs (in
    orders that differ between threads): under a budget of 20 the fleet claims exactly 20, and exactly 20 run."""
    budget = 20
    ids = [str(AsyncJobFactory(organization_id=uuid.uuid4()).id) for _ in range(60)]
    at = time.time() + 4  # both processes set up first, then claim together
    env = {"DRS_MAX_IN_FLIGHT": str(budget)}
    procs = [fleet.start("claim", at, 8, *ids, env=env) for _ in range(2)]
    results = [fleet.result(p) for p in procs]

    assert [r["threads"] for r in results] == [8, 8]
    assert sum(r["claimed"] for r in results) == budget
    assert running_jobs(timezone.now()).count() == budget
    assert AsyncJob.objects.filter(attempts=1).count() == budget
