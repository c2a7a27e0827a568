"""Every line the operator's tools print is true: the job page, `job_inspect`, the doctor and the overview count a
job's deliveries alike (jobs/selectors.py, `deliveries`), and each message that once said something false is held
to what it says here: a summary that denies a job it just listed, a re-send that does not say it ends the job at
once, a cause the job's record does not show, a schedule a message does not have, "nothing to do" after a job
that does not exist."""

import re
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse

from jobs import handlers, selectors
from jobs.clients import sqs
from jobs.models import AsyncJob
from jobs.outcomes import Outcome
from jobs.services import job_run
from tests.jobs.conftest import (
    leased,
    lines_about,
    run,
    scheduled_task_to_dlq,
    store_grant,
    to_dlq,
    waiting,
)

pytestmark = pytest.mark.django_db


class Echo:
    def run(self, run):
        return {"ok": True}


@pytest.fixture
def echo():
    handlers.register("testEcho", Echo())
    yield
    handlers.unregister("testEcho")


def test_the_job_page_counts_lost_deliveries_as_job_inspect_and_the_doctor_do(admin_client, queues, workers_alive):
    # Its only delivery's worker died: the lease expired, nobody took it over yet. The row says 0 lost.
    job = leased(expires_in=-timedelta(minutes=2), lost_deliveries=0, attempts=1)

    page = admin_client.get(reverse("admin:jobs_asyncjob_change", args=[job.id])).content.decode()
    inspected = run("job_inspect", "--job", str(job.id))

    assert re.search(r'<div class="readonly">attempts 1 of 5, lost deliveries 1</div>', page)
    assert "Lost deliveries" not in page
    assert "  deliveries   attempts 1 of 5, lost deliveries 1" in inspected
    assert selectors.deliveries(job).lost == 1


def test_requeue_stuck_never_says_no_stuck_job_was_found_after_listing_one_it_left_alone(queues):
    looping = waiting(quiet=timedelta(hours=2), lost_deliveries=2, attempts=2)

    applied = run("job_requeue_stuck", "--apply")

    assert applied[0].startswith(f"{looping.id}  not re-enqueued")
    assert applied[-1] == (
        "0 of 1 stuck jobs re-enqueued; 1 skipped (1 whose deliveries keep dying, left alone: name each with --job "
        "once its cause is fixed)."
    )
    assert applied.code == 1 and queues.drain() == []
    dry = run("job_requeue_stuck")
    assert dry[-1].startswith("1 stuck jobs found (1 whose deliveries keep dying, left alone")


def test_a_redrive_warns_when_the_job_it_re_sends_will_end_at_once_and_names_the_command_that_runs_it_again(
    queues, echo, ims_invalidations
):
    spent = leased(expires_in=-timedelta(minutes=5), attempts=settings.JOB_MAX_ATTEMPTS, lost_deliveries=1)
    store_grant(spent)
    to_dlq(spent.id)

    output = run("job_redrive_dlq", "--job", str(spent.id), "--apply")

    resent, warning = lines_about(output, spent)
    assert resent.startswith(f"{spent.id}  re-send") and resent.endswith("[done]")
    assert warning == (
        f"{spent.id}  WARNING  its attempts are spent (5 of 5): re-sent, it ends FAILED RETRIES_EXHAUSTED as soon as "
        f"a worker receives it, its credential kept; then `job_rerun --job {spent.id} --apply` runs it again with a "
        "fresh budget"
    )
    # What the warning says happens: the delivery ends it at once, and job_rerun puts it back to work.
    (message,) = queues.drain()
    assert job_run(message["kwargs"]["jobId"], message["kwargs"]["type"]) == Outcome("failed", "RETRIES_EXHAUSTED")
    assert run("job_rerun", "--job", str(spent.id), "--apply")[0].endswith("[done]")
    spent.refresh_from_db()
    assert (spent.status, spent.attempts) == ("IN_PROGRESS", 0)


def test_a_redrive_of_a_job_with_attempts_left_warns_of_nothing(queues):
    fine = leased(expires_in=-timedelta(minutes=5), attempts=1)
    to_dlq(fine.id)

    output = run("job_redrive_dlq", "--apply")

    assert [line for line in output if "WARNING" in line] == []
    assert lines_about(output, fine)[0].endswith("[done]")


def test_requeue_stuck_warns_per_job_whose_attempts_are_spent(queues):
    spent = waiting(quiet=timedelta(hours=2), attempts=settings.JOB_MAX_ATTEMPTS)

    output = run("job_requeue_stuck", "--job", str(spent.id))

    assert lines_about(output, spent)[1].startswith(f"{spent.id}  WARNING  its attempts are spent (5 of 5)")


def test_the_doctor_says_a_dlq_job_never_claimed_was_never_claimed_not_that_it_kept_failing(queues, workers_alive):
    never_ran = waiting(attempts=0)
    to_dlq(never_ran.id)

    (line,) = lines_about(run("doctor"), never_ran)

    assert "dlq_message_for_waiting_job" in line
    assert "it kept failing" not in line
    assert "attempts 0, lost deliveries 0; no worker ever received it" in line


def test_the_doctor_says_a_dlq_job_whose_deliveries_died_died(queues, workers_alive):
    died = leased(expires_in=-timedelta(minutes=5), attempts=1)
    to_dlq(died.id)

    (line,) = lines_about(run("doctor"), died)

    assert "attempts 1, lost deliveries 1; its last 1 deliveries died without an outcome" in line


def test_dropping_a_message_that_calls_no_task_never_claims_it_runs_again_on_a_schedule(queues):
    from jobs.tasks import sweep_unsent_task

    plain = sqs.send_raw(settings.MARKET_JOBS_DLQ_URL, "not a celery message")
    scheduled = scheduled_task_to_dlq(sweep_unsent_task)

    output = run("job_redrive_dlq", "--only-other-tasks", "--apply")

    (plain_line,) = [line for line in output if line.startswith(f"message {plain} ")]
    assert "its own schedule" not in plain_line
    assert "not a Celery message (its body calls no task): nothing could ever run it" in plain_line
    (scheduled_line,) = [line for line in output if line.startswith(f"message {scheduled} ")]
    assert "a message of the scheduled task jobs.sweep_unsent, which runs again on its own schedule" in scheduled_line


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("job_requeue_stuck", ()),
        ("job_release_leases", ()),
        ("job_rerun", ()),
        ("job_redrive_dlq", ()),
        ("job_mark_failed", ("--reason", "x")),
    ],
)
def test_a_job_named_that_does_not_exist_is_never_followed_by_nothing_to_do(queues, command, extra):
    ghost = uuid.uuid4()

    output = run(command, "--job", str(ghost), *extra, "--apply")

    assert output[0] == f"job {ghost}  not found (purged after expiry, or never created)"
    assert not any("nothing to do" in line for line in output)
    assert output[-1].endswith("found; 1 named job(s) do not exist (see above).")
    assert output.code == 1
    assert not AsyncJob.objects.filter(id=ghost).exists()


def test_the_admins_requeue_warns_when_the_job_it_re_sends_will_end_at_once(admin_client, queues):
    spent = waiting(quiet=timedelta(hours=2), attempts=settings.JOB_MAX_ATTEMPTS)

    response = admin_client.post(
        reverse("admin:jobs_asyncjob_changelist"),
        {"action": "requeue", "_selected_action": [str(spent.id)], "confirmed": "yes"},
        follow=True,
    )

    texts = [str(m) for m in response.context["messages"]]
    assert f"Job {spent.id}: its attempts are spent (5 of 5)" in texts[0]
    assert texts[-1] == "Re-enqueued 1 of 1 job(s)."
