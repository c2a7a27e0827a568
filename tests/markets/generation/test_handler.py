"""The market-generation worker end to end: entry point -> SQS -> a real Celery worker -> DRS -> Semrush
(SPEC §5, §6): the happy path, every outcome, retries, duplicate delivery and fencing."""

import pytest

from jobs.models import AsyncJob
from markets.models import Market
from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from sandbox.ims import controls as ims_controls
from sandbox.ims import ledger
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.waits import wait_terminal, wait_until
from tokens.models import PromiseGrant

pytestmark = pytest.mark.worker


def start_job(world, market="DE", language="de"):
    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": market, "languageCode": language, "generatePrompts": True},
        **{"x-promise-audience": "semrush"},
    )
    assert response.status_code == 201, response.content
    handle = response.json()["promptGeneration"]
    return AsyncJob.objects.get(id=handle["jobId"]), Market.objects.get(id=response.json()["id"])


def emf(lines, name):
    return [doc for doc in lines if name in doc]


def publishes(project_id):
    return len(semrush.calls(path_contains=f"{project_id}/publish", method="POST"))


def assert_ended_cleanly(job):
    """Every terminal outcome: grant deleted with the status change, lease cleared, ended_at set; the token
    invalidated at IMS right after (best effort, after commit)."""
    assert PromiseGrant.objects.filter(job_id=job.id).count() == 0
    assert job.lease_token is None and job.lease_expires_at is None and job.ended_at is not None
    wait_until(lambda: ledger.live_tokens() == 0 and ledger.count(ledger.INVALIDATED) >= 1, timeout=10)


def test_happy_path_writes_tagged_prompts_publishes_and_completes(metric_lines, world, async_on, celery_worker, caplog):
    job, market = start_job(world)
    job = wait_terminal(job)
    assert job.status == "COMPLETED", job.error
    written = semrush.prompts(market.semrush_project_id)
    assert job.result == {
        "promptCount": len(written),
        "projectId": market.semrush_project_id,
        "published": True,
        "verdict": "ship",
    }
    assert len(written) == 50 and len({p["text"] for p in written}) == 50
    tags = semrush.tag_values(world.brand.semrush_workspace_id)
    for prompt in written:
        assert sorted(prompt["tagIds"]) == sorted([tags["source"]["semrush"], tags["origin"]["ai"]])
        assert prompt["createdBy"] == "user-1" and prompt["updatedBy"] == "user-1"
    assert publishes(market.semrush_project_id) == 2  # once at creation, once by the job
    assert semrush.project(market.semrush_project_id)["published"] is True
    assert drs.call_count() == 1
    assert job.checkpoints["batchSize"] == 50 and job.checkpoints["written"] == 50 and job.phase == "published"
    assert_ended_cleanly(job)
    assert ledger.count(ledger.EXCHANGED) == 1 and ledger.count(ledger.ROTATED_TO) == 1
    assert len(emf(metric_lines, "DRSInvokeDurationMs")) == 1 and emf(metric_lines, "DRSInvokeFailure") == []
    # The outcome count is emitted when the delivery returns, just after the status change is committed.
    (completed,) = wait_until(lambda: emf(metric_lines, "JobsCompleted"), timeout=10)
    assert completed["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "SpacecatSerenityMarketWorker"
    assert completed["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Environment"]]
    # No token in any log line of the whole run.
    for record in caplog.records:
        assert world.token not in record.getMessage()


@pytest.mark.parametrize(
    ("switch", "code", "failure_metric"),
    [
        ("held", "PROMPT_GENERATION_HELD", False),
        ("gate_error_terminal", "PROMPT_GENERATION_GATE_ERROR", True),
        ("ship_zero", "PROMPT_GENERATION_EMPTY", False),
        ("non_json", "DRS_GENERATION_TERMINAL", True),
    ],
)
def test_a_terminal_drs_answer_fails_the_job_with_its_code_and_never_publishes(
    metric_lines, world, async_on, celery_worker, caplog, switch, code, failure_metric
):
    drs_controls.set_switch(switch)
    job, market = start_job(world)
    job = wait_terminal(job)
    assert (job.status, job.error_code) == ("FAILED", code)
    assert job.error["retryable"] is False and job.error["needsReauth"] is False
    assert publishes(market.semrush_project_id) == 1  # only the synchronous one
    assert semrush.prompts(market.semrush_project_id) == []
    assert_ended_cleanly(job)
    assert ledger.count(ledger.EXCHANGED) == 0  # no token is exchanged before DRS ships
    assert bool(emf(metric_lines, "DRSInvokeFailure")) is failure_metric
    assert Market.objects.filter(id=market.id, publish_state="published").exists()  # the market stays valid


@pytest.mark.parametrize(
    ("target", "code"), [("", "DRS_GENERATION_TERMINAL"), ("drs-prompt-generation", "DRS_INVALID_TARGET")]
)
def test_a_missing_or_malformed_drs_target_fails_terminally(world, async_on, celery_worker, settings, target, code):
    settings.DRS_PROMPT_GENERATION_FUNCTION = target
    job, _market = start_job(world)
    job = wait_terminal(job)
    assert (job.status, job.error_code) == ("FAILED", code)
    assert drs.call_count() == 0
    assert_ended_cleanly(job)


def test_duplicate_prompts_are_trimmed_and_written_once(world, async_on, celery_worker):
    drs_controls.set_switch("duplicates")
    job, market = start_job(world)
    job = wait_terminal(job)
    assert job.status == "COMPLETED", job.error
    texts = [p["text"] for p in semrush.prompts(market.semrush_project_id)]
    assert len(texts) == len(set(texts)) == job.result["promptCount"] > 0
    assert all(t == t.strip() and t for t in texts)


def test_an_ims_refusal_at_exchange_ends_the_job_awaiting_reauthorisation(world, async_on, celery_worker):
    ims_controls.fail_next_exchanges(count=1, status=401)
    job, market = start_job(world)
    job = wait_terminal(job)
    assert job.status == "FAILED"
    assert job.error["code"] == "NEEDS_REAUTH" and job.error["needsReauth"] is True
    assert job.checkpoints["batchSize"] == 50  # the batch stays: a re-authorised run will not call DRS again
    assert semrush.prompts(market.semrush_project_id) == [] and publishes(market.semrush_project_id) == 1
    assert PromiseGrant.objects.filter(job_id=job.id).count() == 0


@pytest.mark.parametrize("switch", ["status_500", "gate_error_retryable", "empty"])
def test_a_retryable_drs_failure_is_retried_and_then_completes(
    metric_lines, world, async_on, celery_worker, settings, caplog, switch
):
    settings.JOB_RETRY_BASE_SECONDS = 1
    drs_controls.set_switch(switch, remaining=1)
    job, _market = start_job(world)
    job = wait_terminal(job)
    assert job.status == "COMPLETED", job.error
    assert job.attempts == 2 and drs.call_count() == 2
    assert job.events.filter(kind="retry_scheduled").count() == 1
    assert len(emf(metric_lines, "DRSInvokeFailure")) == (0 if switch == "gate_error_retryable" else 1)


def test_a_publish_failure_is_retried_without_calling_drs_again(world, async_on, celery_worker, settings):
    settings.JOB_RETRY_BASE_SECONDS = 1
    job, market = start_job(world)
    semrush_controls.fail_next(8, status=503, path="/publish", method="POST")  # outlasts the client's retries
    job = wait_terminal(job, timeout=45)
    assert job.status == "COMPLETED", job.error
    assert drs.call_count() == 1 and job.attempts >= 2
    assert len(semrush.prompts(market.semrush_project_id)) == job.result["promptCount"] == 50


def test_a_market_without_its_semrush_project_yet_is_retryable(world, async_on, celery_worker, settings):
    settings.JOB_RETRY_BASE_SECONDS = 1
    settings.JOB_MAX_ATTEMPTS = 2
    drs_controls.set_latency(1000)  # the market loses its project while DRS works
    job, market = start_job(world)

    Market.objects.filter(id=market.id).update(semrush_project_id=None)
    job = wait_terminal(job, timeout=45)
    assert job.status == "FAILED"
    assert job.error == {
        "code": "RETRIES_EXHAUSTED",
        "message": job.error["message"],
        "retryable": True,
        "needsReauth": False,
    }
    assert "SEMRUSH_PROJECT_MISSING" in job.error["message"] and drs.call_count() == 1


def test_five_simultaneous_deliveries_call_drs_once_and_write_each_prompt_once(world, async_on, celery_worker):
    from jobs.services import job_publish

    drs_controls.set_latency(1500)  # keep the first delivery busy while the others arrive
    job, market = start_job(world)
    for _ in range(4):
        assert job_publish(job.id, job.job_type)
    job = wait_terminal(job, timeout=45)
    assert job.status == "COMPLETED", job.error
    assert drs.call_count() == 1
    texts = [p["text"] for p in semrush.prompts(market.semrush_project_id)]
    assert len(texts) == len(set(texts)) == 50
    assert job.lease_epoch == 1  # exactly one delivery ever held the lease
