"""The job state machine (jobs/states.py): every allowed edge driven through `transition` on a real row, and the
refusals: an edge the table does not allow raises before any write, a row not in the expected status (or not
under the named lease) is left alone, and of two racing changes exactly one moves the job."""

import threading
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs import states
from jobs.models import AsyncJob, JobEvent, JobStatus
from tests.jobs.factories import AsyncJobFactory

EDGES = sorted((source, target) for source, targets in states.ALLOWED.items() for target in targets)
REFUSED = sorted(
    (source, target) for source in JobStatus for target in JobStatus if target not in states.ALLOWED[source]
)

# What each kind of move writes besides the status, in the same UPDATE (as the product's callers do).
FIELDS = {
    JobStatus.COMPLETED: {"result": {"promptCount": 3}},
    JobStatus.FAILED: {"error": states.error_doc("DRS_REJECTED", "bad payload"), "error_code": "DRS_REJECTED"},
    JobStatus.CANCELLED: {},
    JobStatus.IN_PROGRESS: {"result": None, "error": None, "error_code": None, "attempts": 0},
}


def planted(status: str) -> AsyncJob:
    """A job in `status` as the product leaves it: running under a live lease, or finished an hour ago."""
    an_hour_ago = timezone.now() - timedelta(hours=1)
    if status == JobStatus.IN_PROGRESS:
        return AsyncJobFactory(
            lease_token=uuid.uuid4(),
            lease_expires_at=timezone.now() + timedelta(minutes=10),
            lease_epoch=1,
            attempts=1,
            started_at=an_hour_ago,
            updated_at=an_hour_ago,
        )
    finished = {"status": status, "attempts": 2, "started_at": an_hour_ago, "ended_at": an_hour_ago}
    if status == JobStatus.COMPLETED:
        finished["result"] = {"promptCount": 1}
    if status == JobStatus.FAILED:
        finished.update(error=states.error_doc("NEEDS_REAUTH", "401", needs_reauth=True), error_code="NEEDS_REAUTH")
    return AsyncJobFactory(updated_at=an_hour_ago, **finished)


def row(job: AsyncJob) -> dict:
    """Every column of the job's row as stored."""
    return AsyncJob.objects.filter(id=job.id).values().get()


def history(job: AsyncJob) -> list[dict]:
    return list(JobEvent.objects.filter(job_id=job.id).values("kind", "actor", "detail", "at", "trace_id"))


def test_the_table_names_every_status_and_every_terminal_status_reopens_only_to_in_progress():
    assert set(states.ALLOWED) == set(JobStatus)
    assert sorted(states.TERMINAL) == [JobStatus.CANCELLED, JobStatus.COMPLETED, JobStatus.FAILED]
    assert all(states.ALLOWED[status] == {JobStatus.IN_PROGRESS} for status in states.TERMINAL)
    assert len(EDGES) == 6 and len(REFUSED) == 10


@pytest.mark.parametrize(("source", "target"), EDGES, ids=[f"{s}->{t}" for s, t in EDGES])
def test_an_allowed_edge_moves_the_job_and_writes_its_event(db, source, target):
    job = planted(source)
    before = row(job)
    fence = {"lease_token": job.lease_token} if source == JobStatus.IN_PROGRESS else {}

    moved = states.transition(
        job.id,
        to=target,
        expect=source,
        event="moved",
        actor="op",
        detail=f"{source} to {target}",
        **fence,
        **FIELDS[target],
    )

    assert moved is True
    after = row(job)
    now = after["updated_at"]
    assert now > before["updated_at"]
    if target in states.TERMINAL:  # a finished job holds no lease and says when it ended
        ending = {"lease_token": None, "lease_expires_at": None, "ended_at": now}
    else:  # put back to work: running again, no longer ended
        ending = {"ended_at": None}
    assert after == {**before, "status": target, "updated_at": now, "parked_at": None, **ending, **FIELDS[target]}
    assert history(job) == [
        {"kind": "moved", "actor": "op", "detail": f"{source} to {target}", "at": now, "trace_id": ""}
    ]


@pytest.mark.parametrize(("source", "target"), REFUSED, ids=[f"{s}->{t}" for s, t in REFUSED])
def test_an_edge_the_table_does_not_allow_raises_and_leaves_the_row_alone(db, source, target):
    job = planted(source)
    before = row(job)
    with pytest.raises(states.IllegalTransition, match=f"-> {target}$"):
        states.transition(job.id, to=target, expect=source, event="moved", **FIELDS[target])
    assert row(job) == before
    assert history(job) == []


def test_an_expected_set_with_one_refused_edge_is_refused_whole(db):
    """COMPLETED -> COMPLETED is not an edge, so "any terminal -> COMPLETED" raises even for a FAILED row."""
    job = planted(JobStatus.FAILED)
    before = row(job)
    with pytest.raises(states.IllegalTransition):
        states.transition(job.id, to=JobStatus.COMPLETED, expect=states.TERMINAL, event="moved")
    assert row(job) == before
    assert history(job) == []


@pytest.mark.parametrize("status", sorted(states.TERMINAL))
def test_a_finished_job_is_not_moved_by_a_change_that_expects_it_running(db, status):
    """An allowed edge (IN_PROGRESS -> FAILED) whose job ended meanwhile: zero rows, False, nothing written."""
    job = planted(status)
    before = row(job)
    assert states.transition(job.id, to=JobStatus.FAILED, event="failed", **FIELDS[JobStatus.FAILED]) is False
    assert row(job) == before
    assert history(job) == []


def test_a_change_fenced_on_another_lease_token_leaves_the_row_alone(db):
    job = planted(JobStatus.IN_PROGRESS)
    before = row(job)
    moved = states.transition(
        job.id, to=JobStatus.COMPLETED, lease_token=uuid.uuid4(), event="completed", **FIELDS[JobStatus.COMPLETED]
    )
    assert moved is False
    assert row(job) == before
    assert history(job) == []


def test_a_change_whose_extra_filter_no_longer_holds_leaves_the_row_alone(db):
    """The re-run's fence: it names the error it read, and a job whose error changed meanwhile is not re-run."""
    job = planted(JobStatus.FAILED)
    before = row(job)
    moved = states.transition(
        job.id,
        to=JobStatus.IN_PROGRESS,
        expect=JobStatus.FAILED,
        event="rerun",
        extra_filter={"error_code": "RETRIES_EXHAUSTED"},
        **FIELDS[JobStatus.IN_PROGRESS],
    )
    assert moved is False
    assert row(job) == before
    assert history(job) == []


def test_a_change_of_a_missing_job_moves_nothing_and_writes_no_event(db):
    missing = uuid.uuid4()
    assert states.transition(missing, to=JobStatus.FAILED, event="failed") is False
    assert not JobEvent.objects.filter(job_id=missing).exists()


def test_ending_a_parked_job_unparks_it(db):
    job = AsyncJobFactory(parked_at=timezone.now() - timedelta(minutes=5), lost_deliveries=2)
    assert states.transition(job.id, to=JobStatus.FAILED, event="marked_failed", **FIELDS[JobStatus.FAILED]) is True
    job.refresh_from_db()
    assert (job.status, job.parked_at, job.lost_deliveries) == (JobStatus.FAILED, None, 2)


def test_of_two_racing_endings_exactly_one_moves_the_job(transactional_db):
    """Two changes of the same running job at once (its handler completing it, an operator failing it), each in
    its own transaction on its own connection: the row lock decides, the loser updates zero rows."""
    job = planted(JobStatus.IN_PROGRESS)
    barrier = threading.Barrier(2)
    moved: dict[str, bool] = {}

    def end(target: str) -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                moved[target] = states.transition(job.id, to=target, event=target.lower(), **FIELDS[target])
        finally:
            connection.close()

    threads = [threading.Thread(target=end, args=(target,)) for target in (JobStatus.COMPLETED, JobStatus.FAILED)]
    [t.start() for t in threads]
    [t.join() for t in threads]

    assert Counter(moved.values()) == {True: 1, False: 1}
    (winner,) = [target for target, won in moved.items() if won]
    job.refresh_from_db()
    assert job.status == winner
    assert list(job.events.values_list("kind", flat=True)) == [winner.lower()]
