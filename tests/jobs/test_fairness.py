"""Fairness across organizations at claim time, and many deliveries in flight in one process.

The rule's decisions on a table of cases (who runs, who waits), a held-back job through the runner and
through a real worker on the real SQS (it never reaches the DLQ and runs once others stop waiting), and
dozens of concurrent deliveries on real threads keeping every lease and fencing guarantee on a pool of
connections smaller than the number of threads.
"""

import threading
import time
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs import services as job_services
from jobs.context import JobContext
from jobs.leases import lease_claim
from jobs.models import AsyncJob
from jobs.outcomes import COMPLETED, Outcome
from jobs.services.runner import LEASE_LOST
from serenity.db import release_connection
from tests.jobs.factories import AsyncJobFactory

A, B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
HELD_BACK = Outcome("held", "fair_share")


def running(org, n=1, **fields):
    """`n` jobs of `org` under a live lease."""
    return [
        AsyncJobFactory(
            organization_id=org,
            lease_token=uuid.uuid4(),
            attempts=1,
            lease_expires_at=timezone.now() + timedelta(minutes=10),
            **fields,
        )
        for _ in range(n)
    ]


def waiting(org, **fields):
    """A job of `org` whose message is out and receivable, no lease."""
    now = timezone.now()
    return AsyncJobFactory(organization_id=org, **{"message_sent_at": now, "runnable_at": now, **fields})


def expired_lease():
    return {"lease_token": uuid.uuid4(), "lease_expires_at": timezone.now() - timedelta(seconds=1), "attempts": 1}


# (case, share, A running, B's jobs: "running" or a waiting job's fields, claims?)
CASES = [
    ("A alone above its share: work-conserving", 2, 5, [], True),
    ("A below its share while B waits", 2, 1, [{}], True),
    ("A at its share while B, running none, waits", 2, 2, [{}], False),
    ("A above its share while B, running fewer, waits", 2, 4, ["running", "running", "running", {}], False),
    ("A above its share, B waits but runs as many", 2, 3, ["running", "running", "running", {}], True),
    ("A above its share, B waits but runs more", 2, 3, ["running"] * 4 + [{}], True),
    ("B's job is running, not waiting", 2, 2, ["running"], True),
    (
        "B's message is delayed (a retry, a held-back delivery)",
        2,
        2,
        [{"runnable_at": timezone.now() + timedelta(minutes=5)}],
        True,
    ),
    (
        "B's delayed message has become receivable",
        2,
        2,
        [{"runnable_at": timezone.now() - timedelta(seconds=1)}],
        False,
    ),
    ("B's message was never sent (the sweeper's)", 2, 2, [{"message_sent_at": None}], True),
    ("B's job is in a crash loop (nothing re-sends it)", 2, 2, [{"lost_deliveries": 2, **expired_lease()}], True),
    (
        "B's job lost one delivery and its second's lease expired: the next delivery parks it",
        2,
        2,
        [{"lost_deliveries": 1, **expired_lease()}],
        True,
    ),
    ("B's job is parked at its last receive (nothing runs it)", 2, 2, [{"parked_at": timezone.now()}], True),
    ("B's job lost its worker (lease expired): it waits", 2, 2, [expired_lease()], False),
    ("B's job finished", 2, 2, [{"status": "COMPLETED"}], True),
    ("the rule off", 0, 5, [{}], True),
    ("share of one, A runs one, B waits", 1, 1, [{}], False),
]


@pytest.mark.parametrize(("case", "share", "a_running", "b_jobs", "claims"), CASES, ids=[c[0] for c in CASES])
def test_the_fairness_rule_decides_who_runs_and_who_waits(db, settings, case, share, a_running, b_jobs, claims):
    settings.JOB_ORG_FAIR_SHARE = share
    running(A, a_running)
    for fields in b_jobs:
        if fields == "running":
            running(B)
        else:
            waiting(B, **fields)
    job = waiting(A)
    token = lease_claim(job.id, fair_to=A)
    assert (token is not None) == claims
    job.refresh_from_db()
    assert job.attempts == (1 if claims else 0)
    assert (job.lease_token == token) if claims else job.lease_token is None


def test_an_expired_lease_of_its_own_does_not_count_as_running(db, settings):
    settings.JOB_ORG_FAIR_SHARE = 2
    running(A)
    AsyncJobFactory(organization_id=A, **expired_lease())
    waiting(B)
    assert lease_claim(waiting(A).id, fair_to=A) is not None


def test_the_waiting_organization_claims_while_the_busy_one_is_held_back(db, settings):
    settings.JOB_ORG_FAIR_SHARE = 2
    running(A, 4)
    a_job, b_job = waiting(A), waiting(B)
    assert lease_claim(a_job.id, fair_to=A) is None
    assert lease_claim(b_job.id, fair_to=B) is not None
    # B is no longer waiting: A may use the free capacity again.
    assert lease_claim(a_job.id, fair_to=A) is not None


def test_a_held_back_delivery_spends_no_attempt_and_sends_its_job_again_delayed(db, handler, queues, settings):
    settings.JOB_ORG_FAIR_SHARE = 1
    settings.JOB_FAIR_HOLD_SECONDS = 30
    running(A)
    waiting(B)
    job = waiting(A)
    before = timezone.now()
    assert job_services.job_run(job.id, "testEcho") == HELD_BACK
    assert handler.calls == []
    assert_held_back(job, before, queues)


def assert_held_back(job, before, queues) -> None:
    """A held-back job spent nothing (no attempt, no lost delivery, no lease) and waits for a fresh message,
    delayed by the 30 s hold its test set."""
    job.refresh_from_db()
    assert (job.status, job.lease_token, job.attempts, job.lost_deliveries) == ("IN_PROGRESS", None, 0, 0)
    assert job.runnable_at >= before + timedelta(seconds=30)
    assert queues.drain() == []  # a fresh message, delayed: not visible yet
    assert queues.sqs.approximate_counts(queues.url)["Delayed"] == 1


def test_a_delivery_held_by_another_is_still_dropped_not_held_back(db, handler, settings):
    settings.JOB_ORG_FAIR_SHARE = 1
    (job,) = running(A)
    waiting(B)
    assert job_services.job_run(job.id, "testEcho") == Outcome("dropped", "lease_held")


def pg_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_many_concurrent_deliveries_keep_every_lease_and_fence_on_a_small_pool(transactional_db, handler):
    """Thirty-two jobs, each delivered twice at once on real threads, then taken over while waiting (as on a
    slow DRS call): per job exactly one delivery claims at first, the taken-over one writes nothing, and the
    new owner completes it. The waiting threads hold no connection: the process never has more than its
    pool's connections open, for 64 delivering threads."""
    jobs = [AsyncJobFactory(organization_id=uuid.uuid4()) for _ in range(32)]
    waiting_now, go_on = threading.Semaphore(0), threading.Event()
    first_round = threading.local()

    def behaviour(ctx: JobContext):
        if getattr(first_round, "active", False):
            ctx.checkpoint(phase="generating")
            release_connection()  # as before a DRS call: no connection held while waiting
            waiting_now.release()
            go_on.wait(60)
            ctx.checkpoint(phase="generated", by="first")  # fenced: the lease was taken over meanwhile
            return {"by": "first"}
        ctx.checkpoint(phase="generated", by="second")
        return {"by": "second"}

    handler.behaviour = behaviour
    outcomes: list[Outcome] = []
    outcomes_lock = threading.Lock()
    peak = [0]

    def deliver(job, first: bool, barrier=None):
        first_round.active = first
        try:
            if barrier:
                barrier.wait()
            outcome = job_services.job_run(job.id, "testEcho", worker=f"t{threading.get_ident()}")
            with outcomes_lock:
                outcomes.append(outcome)
        finally:
            connection.close()

    barrier = threading.Barrier(64)
    threads = [threading.Thread(target=deliver, args=(job, True, barrier)) for job in jobs for _ in range(2)]
    [t.start() for t in threads]
    for _ in jobs:  # one delivery per job claims and waits; its twin is dropped
        assert waiting_now.acquire(timeout=120)
        peak[0] = max(peak[0], pg_connections())
    deadline = time.monotonic() + 120
    while len(outcomes) < 32 and time.monotonic() < deadline:  # the twins' drops, however slow the machine
        time.sleep(0.05)
    assert Counter(outcomes) == {Outcome("dropped", "lease_held"): 32}
    peak[0] = max(peak[0], pg_connections())
    # Every lease expires while its delivery waits; a second delivery of each job takes it over.
    AsyncJob.objects.filter(id__in=[j.id for j in jobs]).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    connection.close()
    second = [threading.Thread(target=deliver, args=(job, False)) for job in jobs]
    [t.start() for t in second]
    [t.join() for t in second]
    go_on.set()
    [t.join() for t in threads]
    assert Counter(outcomes) == {Outcome("dropped", "lease_held"): 32, COMPLETED: 32, LEASE_LOST: 32}
    for job in AsyncJob.objects.filter(id__in=[j.id for j in jobs]):
        assert (job.status, job.result, job.attempts, job.lease_epoch) == ("COMPLETED", {"by": "second"}, 2, 2)
        assert job.checkpoints == {"by": "second"} and job.lease_token is None
    assert peak[0] <= settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]


@pytest.mark.worker
def test_a_held_back_job_never_reaches_the_dlq_and_runs_once_others_stop_waiting(
    celery_worker, handler, queues, settings
):
    settings.JOB_ORG_FAIR_SHARE = 1
    settings.JOB_FAIR_HOLD_SECONDS = 1
    running(A)
    other = waiting(B)  # waits as far as the database says; nothing delivers it
    job = waiting(A)
    assert job_services.job_publish(job.id, job.job_type)
    # Held back more times than the queue's receive limit would allow one message to be received.
    deadline = time.monotonic() + 120
    while job.events.filter(kind="message_sent").count() <= settings.MARKET_JOBS_MAX_RECEIVE_COUNT + 1:
        assert time.monotonic() < deadline, "the job was not held back repeatedly"
        time.sleep(0.2)
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("IN_PROGRESS", 0)
    assert handler.calls == []
    assert queues.sqs.approximate_counts(queues.dlq_url)["Visible"] == 0
    # The other organization's job is no longer waiting: the held-back job runs at its next delivery.
    AsyncJob.objects.filter(id=other.id).update(status="COMPLETED", ended_at=timezone.now())
    while job.status == "IN_PROGRESS":
        assert time.monotonic() < deadline, "the held-back job never ran"
        time.sleep(0.2)
        job.refresh_from_db()
    assert (job.status, job.attempts, handler.calls) == ("COMPLETED", 1, [job.id])
    assert queues.sqs.approximate_counts(queues.dlq_url)["Visible"] == 0
