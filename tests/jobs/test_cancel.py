"""Cancelling a job whose subject is gone (jobs/services/endings.py `job_cancel`): it ends once, FAILED with the
code given, whatever lease it holds; its grant goes in the same transaction and its token is invalidated after the
outermost commit; a finished job that could come back (re-authorisation, re-run) is closed; nothing else moves."""

import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs import states
from jobs.context import JobContext
from jobs.exceptions import LeaseLost, NotAwaitingReauth
from jobs.models import AsyncJob, JobEvent, JobStatus
from jobs.services import job_cancel, job_reauthorize, job_rerun
from tests.jobs.conftest import KNOWN_TOKEN, leased, plant, run, store_grant
from tokens.models import PromiseGrant
from tokens.pairs import get_pair

pytestmark = pytest.mark.django_db(transaction=True)

CANCEL = {"code": "MARKET_DELETED", "reason": "The market FR/fr was deleted by user-7.", "actor": "user-7"}


def cancelled_events(job) -> list[tuple[str, str]]:
    return list(JobEvent.objects.filter(job_id=job.id, kind="cancelled").values_list("actor", "detail"))


def test_a_running_job_ends_failed_once_whatever_lease_it_holds(ims_invalidations):
    job = leased(expires_in=timedelta(minutes=10))
    store_grant(job)

    assert job_cancel(job.id, **CANCEL) is True
    assert job_cancel(job.id, **CANCEL) is False

    job.refresh_from_db()
    assert (job.status, job.error_code, job.lease_token, job.lease_expires_at) == (
        "FAILED",
        "MARKET_DELETED",
        None,
        None,
    )
    assert job.error == {
        "code": "MARKET_DELETED",
        "message": "The market FR/fr was deleted by user-7.",
        "retryable": False,
        "needsReauth": False,
        "cancelled": True,
    }
    assert job.ended_at is not None and job.result is None
    assert cancelled_events(job) == [("user-7", "MARKET_DELETED: The market FR/fr was deleted by user-7.")]
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]


def test_the_delivery_running_it_stops_at_its_next_fenced_write(ims_invalidations):
    job = leased(expires_in=timedelta(minutes=10))
    delivery = JobContext(AsyncJob.objects.get(id=job.id), job.lease_token)

    job_cancel(job.id, **CANCEL)

    with pytest.raises(LeaseLost):
        delivery.checkpoint(phase="generated", batch={"prompts": [{"prompt": "discarded"}]})
    with pytest.raises(LeaseLost):
        delivery.confirm()
    assert "batch" not in AsyncJob.objects.get(id=job.id).checkpoints


def test_a_job_awaiting_reauthorisation_is_closed_even_to_a_reauthorisation_under_way(ims_invalidations):
    job = plant(
        status=JobStatus.FAILED,
        error_code="NEEDS_REAUTH",
        error=states.error_doc("NEEDS_REAUTH", "401", needs_reauth=True),
        ended_at=timezone.now(),
        user_id="user-7",
    )
    obtained = []

    def obtain_token():
        # The re-authorisation holds the reopen lock while it obtains its credential; the cancel lands now.
        job_cancel(job.id, **CANCEL)
        from tokens.types import PromiseToken

        obtained.append(
            PromiseToken(promise_token="fresh-" + uuid.uuid4().hex, token_type="promise_token", expires_in=60)
        )
        return obtained[-1]

    with pytest.raises(NotAwaitingReauth):
        job_reauthorize(job_id=job.id, user_id="user-7", pair=get_pair("semrush"), obtain_token=obtain_token)

    job.refresh_from_db()
    assert (job.status, job.error_code, job.reopen_lock) == ("FAILED", "MARKET_DELETED", None)
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == [("semrush", obtained[0].promise_token)]  # the credential it obtained, unused
    with pytest.raises(NotAwaitingReauth):
        job_reauthorize(job_id=job.id, user_id="user-7", pair=get_pair("semrush"), obtain_token=obtain_token)


def test_a_job_with_a_parked_credential_is_closed_and_its_credential_ended(ims_invalidations):
    job = plant(
        status=JobStatus.FAILED,
        error_code="RETRIES_EXHAUSTED",
        error=states.error_doc("RETRIES_EXHAUSTED", "Semrush down", retryable=True),
        ended_at=timezone.now(),
    )
    store_grant(job)

    assert job_cancel(job.id, **CANCEL) is True

    job.refresh_from_db()
    assert (job.error_code, job.error["retryable"], job.error["cancelled"]) == ("MARKET_DELETED", False, True)
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]
    assert cancelled_events(job)[0][1].endswith("(it had ended already)")
    refused = job_rerun(job.id, actor="operator")
    assert (refused.done, refused.why_not) == (
        False,
        "it was cancelled (MARKET_DELETED: The market FR/fr was deleted by user-7.): nothing re-runs it",
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"status": JobStatus.COMPLETED, "result": {"promptCount": 3}},
        {
            "status": JobStatus.FAILED,
            "error_code": "PROMPT_GENERATION_HELD",
            "error": states.error_doc("PROMPT_GENERATION_HELD", "held"),
        },
    ],
)
def test_a_job_finished_for_good_is_left_as_it_is(ims_invalidations, fields):
    job = plant(ended_at=timezone.now(), **fields)
    before = AsyncJob.objects.filter(id=job.id).values().get()

    assert job_cancel(job.id, **CANCEL) is False

    assert AsyncJob.objects.filter(id=job.id).values().get() == before
    assert cancelled_events(job) == [] and ims_invalidations == []


def test_a_job_of_another_subject_is_not_cancelled(ims_invalidations):
    job = leased(expires_in=timedelta(minutes=10), params={"marketId": str(uuid.uuid4())})

    assert job_cancel(job.id, **CANCEL, extra_filter={"params__marketId": str(uuid.uuid4())}) is False
    assert AsyncJob.objects.get(id=job.id).status == "IN_PROGRESS"


def test_in_a_callers_transaction_the_token_is_invalidated_only_after_its_commit(ims_invalidations):
    job = leased(expires_in=timedelta(minutes=10))
    store_grant(job)

    with transaction.atomic():
        assert job_cancel(job.id, **CANCEL) is True
        assert ims_invalidations == []

    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]


def test_a_cancel_the_callers_transaction_rolls_back_leaves_the_job_and_its_token(ims_invalidations):
    job = leased(expires_in=timedelta(minutes=10))
    store_grant(job)

    with transaction.atomic():
        job_cancel(job.id, **CANCEL)
        transaction.set_rollback(True)

    assert AsyncJob.objects.get(id=job.id).status == "IN_PROGRESS"
    assert PromiseGrant.objects.filter(job_id=job.id).exists() and ims_invalidations == []


def test_job_rerun_names_a_cancelled_job_and_says_why_it_is_not_re_run(ims_invalidations):
    job = leased(expires_in=timedelta(minutes=10))
    job_cancel(job.id, **CANCEL)

    lines = run("job_rerun", "--job", str(job.id), "--apply")

    assert lines[0] == (
        f"{job.id}  cannot re-run  it was cancelled (MARKET_DELETED: The market FR/fr was deleted by user-7.): "
        "nothing re-runs it"
    )
    assert lines.code == 1
    assert AsyncJob.objects.get(id=job.id).status == "FAILED"
