"""The job runner: drops, dispatch on the stored type, the lease claim, outcomes, retries (SPEC §5.1-5.3, §5.8)."""

import contextlib
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from jobs import leases
from jobs import services as job_services
from jobs.context import JobContext
from jobs.exceptions import DeliveryNotStarted, JobFailed, LeaseLost, RetryLater, Throttled
from jobs.leases import lease_claim
from jobs.models import AsyncJob, JobEvent
from jobs.outcomes import COMPLETED, Outcome
from jobs.services import endings, runner
from tests.failover import end_this_threads_backend, meet_a_dead_connection
from tests.jobs.conftest import KNOWN_TOKEN, store_grant
from tests.jobs.factories import AsyncJobFactory
from tests.waits import wait_until
from tokens import services as grants
from tokens.models import PromiseGrant
from tokens.types import PromiseToken


def test_a_message_carries_only_the_job_id_and_type(db, queues):
    job = AsyncJobFactory(params={"secret": "never-in-a-message"})
    assert job_services.job_publish(job.id, job.job_type) is True
    (message,) = queues.drain()
    assert message["task"] == "jobs.run"
    assert message["args"] == []
    assert message["kwargs"] == {"jobId": str(job.id), "type": "testEcho"}
    assert "never-in-a-message" not in message["raw"]
    job.refresh_from_db()
    assert job.message_sent_at is not None
    assert list(job.events.values_list("kind", flat=True)) == ["message_sent"]


def test_a_message_for_a_missing_job_is_dropped(db, handler):
    assert job_services.job_run(uuid.uuid4(), "testEcho") == Outcome("dropped", "missing")
    assert handler.calls == []


def test_a_message_with_a_malformed_job_id_is_dropped(db, handler):
    assert job_services.job_run("not-a-uuid", "testEcho") == Outcome("dropped", "malformed")


@pytest.mark.parametrize("status", ["COMPLETED", "FAILED", "CANCELLED"])
def test_a_message_for_a_finished_job_is_dropped_and_the_job_left_alone(db, handler, status):
    job = AsyncJobFactory(status=status)
    before = AsyncJob.objects.get(id=job.id).updated_at
    assert job_services.job_run(job.id, "testEcho") == Outcome("dropped", "not_in_progress")
    assert handler.calls == []
    assert AsyncJob.objects.get(id=job.id).updated_at == before


def test_a_message_whose_type_contradicts_the_stored_type_is_dropped_without_touching_the_job(db, handler, caplog):
    job = AsyncJobFactory()
    assert job_services.job_run(job.id, "somethingElse") == Outcome("dropped", "type_mismatch")
    job.refresh_from_db()
    assert (job.status, job.attempts, job.lease_token) == ("IN_PROGRESS", 0, None)
    assert handler.calls == []
    assert any(r.levelname == "ERROR" and "contradicts" in r.getMessage() for r in caplog.records)


def test_a_job_type_without_a_handler_fails_with_unknown_job_type(db):
    job = AsyncJobFactory(job_type="noSuchType")
    assert job_services.job_run(job.id, "noSuchType") == Outcome("failed", "UNKNOWN_JOB_TYPE")
    job.refresh_from_db()
    assert job.status == "FAILED"
    assert job.error == {
        "code": "UNKNOWN_JOB_TYPE",
        "message": "No handler for this job type.",
        "retryable": False,
        "needsReauth": False,
    }
    assert job.ended_at is not None


def test_a_successful_run_completes_with_the_result_and_clears_the_lease(db, handler):
    job = AsyncJobFactory()
    handler.behaviour = lambda run: {"promptCount": 3}
    assert job_services.job_run(job.id, "testEcho") == COMPLETED
    job.refresh_from_db()
    assert (job.status, job.result, job.lease_token, job.lease_expires_at) == (
        "COMPLETED",
        {"promptCount": 3},
        None,
        None,
    )
    assert job.attempts == 1 and job.lease_epoch == 1 and job.ended_at is not None and job.started_at is not None
    assert list(JobEvent.objects.filter(job=job).values_list("kind", flat=True)) == ["lease_claimed", "completed"]


def test_a_terminal_error_fails_the_job_with_its_code(db, handler):
    job = AsyncJobFactory()

    def fail(run):
        raise JobFailed("PROMPT_GENERATION_HELD", "held by the language gate")

    handler.behaviour = fail
    assert job_services.job_run(job.id, "testEcho") == Outcome("failed", "PROMPT_GENERATION_HELD")
    job.refresh_from_db()
    assert job.status == "FAILED" and job.error_code == "PROMPT_GENERATION_HELD" and job.lease_token is None


def test_a_worker_whose_lease_was_taken_over_cannot_write_a_checkpoint_a_token_or_a_result(db, ims_invalidations):
    job = AsyncJobFactory()
    store_grant(job)
    exchanged = grants.grant_load(job.id)
    old = lease_claim(job.id)
    AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    new = lease_claim(job.id)
    stale = JobContext(AsyncJob.objects.get(id=job.id), old)
    rotated = PromiseToken(promise_token="rotated-by-a-stale-worker", token_type="promise_token", expires_in=60)
    with pytest.raises(LeaseLost):
        stale.checkpoint(phase="generated", batch={"prompts": []})
    with pytest.raises(LeaseLost):
        stale.confirm()
    with pytest.raises(LeaseLost):
        stale.store_rotated_token(exchanged=exchanged, rotated=rotated)
    from jobs import states

    assert states.transition(job.id, to="COMPLETED", lease_token=old, event="completed", result={"x": 1}) is False
    job.refresh_from_db()
    assert job.status == "IN_PROGRESS" and job.lease_token == new and job.checkpoints == {} and job.result is None
    assert JobEvent.objects.filter(job=job, kind="lease_lost").count() == 3
    # The grant still holds the token the new owner will use; the stale worker's rotated token is dead.
    assert grants.grant_load(job.id).token == exchanged.token
    assert ims_invalidations == [("semrush", "rotated-by-a-stale-worker")]


def test_a_heartbeat_confirms_the_lease_without_stretching_it_past_the_message_visibility(transactional_db):
    job = AsyncJobFactory()
    run = JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id))
    claimed = AsyncJob.objects.get(id=job.id)
    claimed_until = claimed.lease_expires_at

    def beat_after(moment):
        beat = AsyncJob.objects.get(id=job.id).updated_at
        return beat if beat > moment else None

    with run.heartbeat(every=0.2):
        first = wait_until(lambda: beat_after(claimed.updated_at), timeout=10, what="a heartbeat")
        wait_until(lambda: beat_after(first), timeout=10, what="a second heartbeat")
    job.refresh_from_db()
    # Never extended: a crashed worker's redelivered message (visibility 960 s > lease 930 s) must find
    # the lease expired, not dropped as held.
    assert job.lease_expires_at == claimed_until
    assert job.updated_at > job.started_at  # the beat shows the worker is alive


def test_an_expired_lease_cannot_be_confirmed(db):
    job = AsyncJobFactory()
    run = JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id))
    AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(LeaseLost):
        run.confirm()


def test_a_heartbeat_that_finds_the_lease_gone_raises_lease_lost_after_the_slow_call(transactional_db):
    job = AsyncJobFactory()
    run = JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id))
    with pytest.raises(LeaseLost), run.heartbeat(every=0.1):
        AsyncJob.objects.filter(id=job.id).update(lease_token=uuid.uuid4())
        time.sleep(0.4)


def test_a_retryable_error_releases_the_lease_and_queues_a_delayed_retry(db, handler, queues, settings):
    settings.JOB_RETRY_BASE_SECONDS = 5
    job = AsyncJobFactory()

    def flaky(run):
        raise RetryLater("DRS_TRANSIENT", "timeout")

    handler.behaviour = flaky
    assert job_services.job_run(job.id, "testEcho") == Outcome("retry", "DRS_TRANSIENT")
    job.refresh_from_db()
    assert (job.status, job.lease_token, job.attempts) == ("IN_PROGRESS", None, 1)
    assert job.message_sent_at is not None
    assert queues.drain() == []  # delayed: not visible yet
    counts = queues.sqs.approximate_counts(queues.url)
    assert counts["Delayed"] == 1
    assert JobEvent.objects.filter(job=job, kind="retry_scheduled").count() == 1


def test_retries_are_bounded_and_end_failed_and_retryable(db, handler, queues, settings):
    settings.JOB_MAX_ATTEMPTS = 2
    job = AsyncJobFactory()

    def flaky(run):
        raise RetryLater("SEMRUSH_UNAVAILABLE", "503")

    handler.behaviour = flaky
    assert job_services.job_run(job.id, "testEcho") == Outcome("retry", "SEMRUSH_UNAVAILABLE")
    assert job_services.job_run(job.id, "testEcho") == Outcome("failed", "RETRIES_EXHAUSTED")
    job.refresh_from_db()
    assert job.status == "FAILED"
    assert job.error == {
        "code": "RETRIES_EXHAUSTED",
        "message": "SEMRUSH_UNAVAILABLE: 503",
        "retryable": True,
        "needsReauth": False,
    }


def test_a_job_redelivered_past_its_attempt_budget_fails_without_running(db, handler, settings):
    settings.JOB_MAX_ATTEMPTS = 2
    job = AsyncJobFactory(attempts=2)
    assert job_services.job_run(job.id, "testEcho") == Outcome("failed", "RETRIES_EXHAUSTED")
    assert handler.calls == []


def test_a_claim_that_errors_propagates_so_the_message_is_redelivered(db, handler, monkeypatch):
    job = AsyncJobFactory()

    def broken(*args, **kwargs):
        raise DatabaseError("connection reset")

    monkeypatch.setattr(runner, "lease_claim", broken)
    with pytest.raises(DatabaseError):
        job_services.job_run(job.id, "testEcho")
    assert handler.calls == []


def test_of_five_concurrent_deliveries_exactly_one_runs_the_handler(transactional_db, handler):
    job = AsyncJobFactory()
    handler.behaviour = lambda run: time.sleep(0.5) or {"ok": True}
    outcomes, barrier = [], threading.Barrier(5)

    def deliver():
        barrier.wait()
        try:
            outcomes.append(job_services.job_run(job.id, "testEcho"))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(5)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(handler.calls) == 1
    assert Counter(outcomes) == {COMPLETED: 1, Outcome("dropped", "lease_held"): 4}
    assert JobEvent.objects.filter(job=job, kind="delivery_dropped").count() == 4
    job.refresh_from_db()
    assert job.status == "COMPLETED" and job.attempts == 1


@pytest.mark.worker
def test_a_queued_job_is_run_by_a_real_worker_through_sqs(celery_worker, handler):
    job = AsyncJobFactory()
    handler.behaviour = lambda run: {"ran": True}
    assert job_services.job_publish(job.id, job.job_type)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status != "IN_PROGRESS":
            break
        time.sleep(0.1)
    assert job.status == "COMPLETED" and job.result == {"ran": True}


def test_an_unexpected_error_releases_the_lease_so_the_redelivery_can_claim(db, handler):
    job = AsyncJobFactory()

    def bug(run):
        raise ZeroDivisionError("bug")

    handler.behaviour = bug
    with pytest.raises(ZeroDivisionError):
        job_services.job_run(job.id, "testEcho")
    job.refresh_from_db()
    assert job.status == "IN_PROGRESS" and job.lease_token is None and job.attempts == 1
    handler.behaviour = lambda run: {"ok": True}
    assert job_services.job_run(job.id, "testEcho") == COMPLETED


@pytest.mark.django_db(transaction=True)
def test_a_delivery_the_database_drops_mid_run_hands_its_job_back_at_once(handler, queues):
    """A failover mid-run: the job is handed back (lease released, a fresh message) as soon as the database
    answers, so it resumes within seconds, not after its message's visibility timeout."""
    job = AsyncJobFactory()

    def dropped(run):
        meet_a_dead_connection()

    handler.behaviour = dropped
    assert job_services.job_run(job.id, "testEcho") == runner.HANDED_BACK_DISCONNECTED
    job.refresh_from_db()
    assert (job.status, job.lease_token, job.attempts) == ("IN_PROGRESS", None, 1)
    assert job.events.filter(kind="lease_released", detail__startswith="database unavailable").count() == 1
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "testEcho"}]
    handler.behaviour = lambda run: {"ok": True}
    assert job_services.job_run(job.id, "testEcho") == COMPLETED


def commit_then_lose_the_answer(monkeypatch, module, name: str) -> None:
    """`module.name` commits as usual the first time, then its connection dies before the caller hears back
    (a failover between the commit and its answer): the caller's retry runs on a fresh connection."""
    real, calls = getattr(module, name), []

    def lost_answer(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(result)
        if len(calls) == 1:
            meet_a_dead_connection()
        return result

    monkeypatch.setattr(module, name, lost_answer)


@pytest.mark.django_db(transaction=True)
def test_a_retry_whose_lease_release_answer_was_lost_is_still_sent(handler, queues, monkeypatch, settings):
    """The release committed and only its answer was lost: the retry finds no lease of ours, and a free one.
    The delayed message is sent all the same, so the job does not sit IN_PROGRESS with nothing queued."""
    settings.JOB_RETRY_BASE_SECONDS = 0
    job = AsyncJobFactory()

    def transient(run):
        raise RetryLater("DRS_TRANSIENT", "timeout")

    handler.behaviour = transient
    commit_then_lose_the_answer(monkeypatch, runner, "lease_release")

    assert job_services.job_run(job.id, "testEcho") == Outcome("retry", "DRS_TRANSIENT")

    job.refresh_from_db()
    assert (job.status, job.lease_token, job.attempts) == ("IN_PROGRESS", None, 1)
    assert job.events.filter(kind="retry_scheduled").count() == 1
    wait_until(lambda: queues.drain(), timeout=30, what="the retry's message")
    handler.behaviour = lambda run: {"ok": True}
    assert job_services.job_run(job.id, "testEcho") == COMPLETED


@pytest.mark.django_db(transaction=True)
def test_a_throttle_whose_release_answer_was_lost_gives_the_attempt_back_once(handler, queues, monkeypatch):
    job = AsyncJobFactory()

    def throttled(run):
        raise Throttled("DRS_THROTTLED", "slow down", retry_after=0)

    handler.behaviour = throttled
    commit_then_lose_the_answer(monkeypatch, runner, "lease_release")

    assert job_services.job_run(job.id, "testEcho") == Outcome("held", "DRS_THROTTLED")

    job.refresh_from_db()
    assert (job.lease_token, job.attempts, job.throttles) == (None, 0, 1)
    wait_until(lambda: queues.drain(), timeout=30, what="the throttled job's message")


@pytest.mark.django_db(transaction=True)
def test_a_rotated_token_stored_by_a_commit_whose_answer_was_lost_is_kept(monkeypatch, ims_invalidations):
    """The store's retry finds the grant already holding the rotated token: it is the job's, not invalidated."""
    job = AsyncJobFactory()
    store_grant(job)
    exchanged = grants.grant_load(job.id)
    run = JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id))
    rotated = PromiseToken(promise_token="rotated-once", token_type="promise_token", expires_in=60)

    def lost_after_commit(write):  # the whole store commits, then its answer is lost: the retry runs again
        write()
        end_this_threads_backend()
        connection.close()  # as the retry does: a fresh connection for the second try
        return write()

    monkeypatch.setattr("jobs.context.retry_once_on_disconnect", lost_after_commit)
    run.store_rotated_token(exchanged=exchanged, rotated=rotated, exchangedAt="now")

    assert grants.grant_load(job.id).token == rotated
    assert ims_invalidations == []
    assert PromiseGrant.objects.get(job_id=job.id).rotations == 1
    assert AsyncJob.objects.get(id=job.id).checkpoints == {"exchangedAt": "now"}


@pytest.mark.django_db(transaction=True)
def test_a_lease_lost_to_a_failed_grant_fence_is_released_and_the_job_sent_again(handler, queues, ims_invalidations):
    """The delivery still holds its lease but the grant no longer holds the token it exchanged: the rotated
    token is invalidated, and the job, which nobody else holds, is sent again rather than left stranded."""
    job = AsyncJobFactory()
    store_grant(job)

    def rotate_over_a_changed_grant(run):
        exchanged = grants.grant_load(job.id)
        PromiseGrant.objects.filter(job_id=job.id).update(fingerprint="changed-meanwhile")
        rotated = PromiseToken(promise_token="rotated-orphan", token_type="promise_token", expires_in=60)
        run.store_rotated_token(exchanged=exchanged, rotated=rotated)

    handler.behaviour = rotate_over_a_changed_grant
    assert job_services.job_run(job.id, "testEcho") == runner.LEASE_LOST

    job.refresh_from_db()
    assert (job.status, job.lease_token) == ("IN_PROGRESS", None)
    assert ims_invalidations == [("semrush", "rotated-orphan")]
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "testEcho"}]


def drop_before(monkeypatch, module, name: str, calls: tuple[int, ...] = (1,)) -> None:
    """The calls of `module.name` numbered in `calls` (from 1) meet a connection the database dropped:
    nothing of them commits."""
    real, made = getattr(module, name), []

    def dropped(*args, **kwargs):
        made.append(1)
        if len(made) in calls:
            end_this_threads_backend()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, dropped)


@pytest.mark.django_db(transaction=True)
def test_a_parking_the_database_drops_once_is_made_on_a_fresh_connection(handler, monkeypatch):
    """On its final receive the message must not go back (SQS would move it to the DLQ): the park is retried."""
    job = AsyncJobFactory()
    drop_before(monkeypatch, runner, "lease_park")

    assert job_services.job_run(job.id, "testEcho", final_receive=True) == runner.PARKED
    assert AsyncJob.objects.get(id=job.id).parked_at is not None and handler.calls == []


@pytest.mark.django_db(transaction=True)
def test_a_parking_the_database_keeps_dropping_gives_the_message_back_at_once(handler, monkeypatch):
    """Nothing ran: DeliveryNotStarted (the task makes the message visible again at once, not after its
    visibility timeout)."""
    job = AsyncJobFactory()
    drop_before(monkeypatch, runner, "lease_park", calls=(1, 2))

    with pytest.raises(DeliveryNotStarted):
        job_services.job_run(job.id, "testEcho", final_receive=True)
    assert AsyncJob.objects.get(id=job.id).parked_at is None and handler.calls == []


@pytest.mark.django_db(transaction=True)
def test_a_release_that_finds_the_job_handed_back_sends_no_second_message(handler, queues, monkeypatch):
    """A stopping worker handed the job back (its message out) while the delivery's own release met a dropped
    connection: the release's retry finds the lease free, but it was not this release that freed it."""
    job = AsyncJobFactory()

    def handed_back_then_retry(run):
        assert runner.hand_back(run, reason="worker stopping")
        raise RetryLater("DRS_TRANSIENT", "timeout")

    handler.behaviour = handed_back_then_retry
    drop_before(monkeypatch, runner, "lease_release", calls=(2,))  # the hand-back's release went; then ours

    assert job_services.job_run(job.id, "testEcho") == runner.LEASE_LOST
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "testEcho"}]
    assert queues.sqs.approximate_counts(queues.url)["Delayed"] == 0
    assert not JobEvent.objects.filter(job=job, kind="retry_scheduled").exists()


@pytest.mark.django_db(transaction=True)
def test_a_release_that_finds_a_later_claim_released_sends_nothing(handler, queues, monkeypatch):
    """The delivery's lease expired and another delivery claimed the job and gave it back meanwhile: a free
    lease after our dropped release is that delivery's doing (the lease's epoch moved), not ours."""
    job = AsyncJobFactory()

    def overtaken_then_retry(run):
        AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        other = lease_claim(job.id)
        assert leases.lease_release(job.id, other, reason="the other delivery's retry")
        raise RetryLater("DRS_TRANSIENT", "timeout")

    handler.behaviour = overtaken_then_retry
    drop_before(monkeypatch, runner, "lease_release")

    assert job_services.job_run(job.id, "testEcho") == runner.LEASE_LOST
    assert queues.drain() == [] and queues.sqs.approximate_counts(queues.url)["Delayed"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_rotated_token_committed_before_the_lease_went_is_not_invalidated(monkeypatch, ims_invalidations):
    """The store committed (the grant holds the rotated token) and its answer was lost; the lease was handed
    back before the retry, which fails its fence: the token is the job's all the same, so it stays live."""
    job = AsyncJobFactory()
    store_grant(job)
    exchanged = grants.grant_load(job.id)
    lease = lease_claim(job.id)
    run = JobContext(AsyncJob.objects.get(id=job.id), lease)
    rotated = PromiseToken(promise_token="rotated-then-handed-back", token_type="promise_token", expires_in=60)

    def lost_then_handed_back(write):
        write()
        assert leases.lease_release(job.id, lease, reason="worker stopping")
        return write()

    monkeypatch.setattr("jobs.context.retry_once_on_disconnect", lost_then_handed_back)
    with pytest.raises(LeaseLost):
        run.store_rotated_token(exchanged=exchanged, rotated=rotated)

    assert grants.grant_load(job.id).token == rotated
    assert ims_invalidations == []


@pytest.mark.django_db(transaction=True)
def test_a_rotated_token_the_database_stays_away_from_storing_is_invalidated(
    handler, queues, monkeypatch, ims_invalidations
):
    """A failover while the rotated token is stored, and again on the store's retry: the grant still holds the
    token that was exchanged, so the rotated one belongs to nobody. It is invalidated at IMS, not left live; the
    delivery is handed back as for any database failure mid-run."""
    job = AsyncJobFactory()
    store_grant(job)

    def rotate(run):
        exchanged = grants.grant_load(job.id)
        rotated = PromiseToken(promise_token="rotated-never-stored", token_type="promise_token", expires_in=60)
        run.store_rotated_token(exchanged=exchanged, rotated=rotated)

    handler.behaviour = rotate
    drop_before(monkeypatch, grants, "grant_rotate", calls=(1, 2))

    assert job_services.job_run(job.id, "testEcho") == runner.HANDED_BACK_DISCONNECTED

    assert grants.grant_load(job.id).token.promise_token == KNOWN_TOKEN
    assert ims_invalidations == [("semrush", "rotated-never-stored")]
    job.refresh_from_db()
    assert (job.status, job.lease_token) == ("IN_PROGRESS", None)
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "testEcho"}]


class CommitWithItsAnswerLost:
    """`transaction` as jobs/services/endings.py uses it: the first atomic block commits, then the connection
    dies before the commit's answer reaches the caller."""

    def __init__(self):
        self.lost = False

    @contextlib.contextmanager
    def atomic(self):
        with transaction.atomic():
            yield
        if not self.lost:
            self.lost = True
            meet_a_dead_connection()


@pytest.mark.django_db(transaction=True)
def test_a_completion_whose_commit_answer_was_lost_still_invalidates_the_token(handler, monkeypatch, ims_invalidations):
    """The job ended and its grant was deleted, but the answer was lost: the ending is still the delivery's
    outcome, and the token it took is still invalidated at IMS, not left live with nobody holding it."""
    job = AsyncJobFactory()
    store_grant(job)
    monkeypatch.setattr(endings, "transaction", CommitWithItsAnswerLost())

    assert job_services.job_run(job.id, "testEcho") == COMPLETED

    job.refresh_from_db()
    assert job.status == "COMPLETED" and not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]


@pytest.mark.django_db(transaction=True)
def test_a_completion_whose_commit_nobody_can_confirm_still_invalidates_the_token(
    handler, monkeypatch, ims_invalidations
):
    """The commit's answer was lost, and the read that would tell whether it landed meets a dead connection too:
    the job was ending, so the token it took is invalidated all the same; the caller's retry finds it ended."""
    job = AsyncJobFactory()
    store_grant(job)
    monkeypatch.setattr(endings, "transaction", CommitWithItsAnswerLost())
    drop_before(monkeypatch, grants, "grant_exists")

    assert job_services.job_run(job.id, "testEcho") == runner.LEASE_LOST

    job.refresh_from_db()
    assert job.status == "COMPLETED" and not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]


def test_a_failed_re_send_leaves_the_job_waiting_for_the_sweeper(db, queues):
    job = AsyncJobFactory(message_sent_at=timezone.now())
    queues.sqs.client().delete_queue(QueueUrl=queues.url)  # the send now fails
    assert job_services.job_requeue(job.id, actor="operator") is False
    job.refresh_from_db()
    assert (job.status, job.message_sent_at) == ("IN_PROGRESS", None)
    assert job.events.filter(kind="send_failed").count() == 1
    queues.sqs.ensure_queues()
    AsyncJob.objects.filter(id=job.id).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert [j.id for j in job_services.jobs_sweep_unsent(grace_seconds=60)] == [job.id]
    (message,) = queues.drain()
    assert message["kwargs"] == {"jobId": str(job.id), "type": "testEcho"}


def test_a_failed_first_send_fails_the_job_as_enqueue_failed(db, queues):
    job = AsyncJobFactory()
    queues.sqs.client().delete_queue(QueueUrl=queues.url)
    assert job_services.job_publish(job.id, job.job_type, first=True) is False
    job.refresh_from_db()
    assert (job.status, job.error_code, job.error["retryable"]) == ("FAILED", "ENQUEUE_FAILED", True)


@pytest.mark.django_db(transaction=True)
def test_a_claim_the_database_drops_is_not_started_and_leaves_the_job_unclaimed(handler, settings):
    """A failover during the claim (its transaction waits on the fleet's budget lock, held here, when its
    backend is terminated): the job's row shows no claim, so the delivery has not started and its message is
    handed back at once (DeliveryNotStarted) instead of waiting out its visibility timeout."""
    from jobs.exceptions import DeliveryNotStarted
    from jobs.leases import IN_FLIGHT_LOCK_KEY

    settings.DRS_MAX_IN_FLIGHT = 10
    job = AsyncJobFactory()
    raised: list[BaseException] = []

    def deliver() -> None:
        try:
            job_services.job_run(job.id, "testEcho")
        except BaseException as exc:  # what the delivery raised is the result
            raised.append(exc)
        finally:
            connection.close()

    with transaction.atomic(), connection.cursor() as cursor:  # holds the budget lock until the end
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [IN_FLIGHT_LOCK_KEY])
        delivery = threading.Thread(target=deliver)
        delivery.start()
        waiting: list = []
        deadline = time.monotonic() + 30
        while not waiting and time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # the view is read afresh inside a transaction
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
                "AND query LIKE %s",
                ["%pg_advisory_xact_lock%"],
            )
            waiting = cursor.fetchall()
        assert len(waiting) == 1, "the claim never waited on the budget lock"
        cursor.execute("SELECT pg_terminate_backend(%s)", [waiting[0][0]])
        delivery.join(30)

    assert [type(e) for e in raised] == [DeliveryNotStarted]
    job.refresh_from_db()
    assert (job.lease_token, job.attempts, handler.calls) == (None, 0, [])
    assert job_services.job_run(job.id, "testEcho") == COMPLETED
