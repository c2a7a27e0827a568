"""Throttled calls are back-pressure, not failure, with real workers, the local SQS, PostgreSQL and the simulators
over real HTTP enforcing their limits: a throttled DRS invocation and a throttled Semrush write give the delivery's
attempt back, are recorded and counted, and the job then completes without redoing what it had written; a job
throttled for ever ends THROTTLED_TOO_LONG."""

import json
import threading

import httpx
import pytest

from markets.clients import semrush as semrush_client
from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from sandbox.ims import controls as ims_controls
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.markets.generation.test_handler import emf, start_job
from tests.waits import wait_terminal, wait_until

pytestmark = pytest.mark.worker


@pytest.fixture
def quick_resend(settings):
    settings.JOB_THROTTLE_MAX_DELAY_SECONDS = 1
    settings.JOB_RETRY_BASE_SECONDS = 1


def hold_drs_invocation(sims, brand: str) -> threading.Thread:
    """One DRS invocation of another brand, held in flight by the simulator's latency (it takes a place)."""
    body = {"brand": brand, "num_prompts": 1}

    def call():
        httpx.post(f"{sims.url}/sandbox/drs/invoke", content=json.dumps(body), timeout=60)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def test_a_throttled_drs_invocation_spends_no_attempt_and_the_job_completes_once_a_place_frees(
    metric_lines, world, async_on, celery_worker, sims, quick_resend
):
    drs_controls.set_concurrency_limit(1)
    drs_controls.set_latency(8000, brand="Occupier")
    occupier = hold_drs_invocation(sims, "Occupier")
    wait_until(lambda: drs_controls.concurrency()["inFlight"] == 1)

    job, market = start_job(world)
    job = wait_terminal(job, timeout=60)
    occupier.join(timeout=30)

    assert job.status == "COMPLETED", job.error
    outcomes = [c["outcome"] for c in drs.call_records(world.brand.name)]
    throttled = outcomes.count("throttled")
    assert throttled >= 1 and outcomes.count("ship") == 1
    assert job.attempts == 1  # every throttled delivery gave its attempt back
    assert job.throttles == throttled
    assert job.events.filter(kind="throttled").count() == throttled
    assert job.events.filter(kind="retry_scheduled").count() == 0
    assert "DRS_THROTTLED" in job.events.filter(kind="throttled").first().detail
    assert len(emf(metric_lines, "DRSThrottled")) == throttled
    assert emf(metric_lines, "DRSInvokeFailure") == []
    assert len(semrush.prompts(market.semrush_project_id)) == 50


def test_a_throttled_semrush_write_spends_no_attempt_and_the_job_completes_without_rewriting(
    metric_lines, world, async_on, celery_worker, quick_resend, monkeypatch
):
    monkeypatch.setattr(semrush_client, "PROMPT_BATCH_SIZE", 20)  # 50 prompts: batches of 20, 20, 10
    # One write per hour per client pair: the first batch lands, the second is throttled (Retry-After ~1 h,
    # longer than the client waits in place), so the job itself is throttled.
    semrush_controls.set_rate_limit(1, per_seconds=3600, path="/prompts", method="POST")
    job, market = start_job(world)

    wait_until(lambda: job.events.filter(kind="throttled").exists(), timeout=45)
    semrush_controls.set_rate_limit(None)  # Semrush has room again
    job = wait_terminal(job, timeout=45)

    assert job.status == "COMPLETED", job.error
    assert job.attempts == 1 and job.throttles >= 1
    assert job.events.filter(kind="throttled").count() == job.throttles
    assert job.events.filter(kind="retry_scheduled").count() == 0
    assert "SEMRUSH_THROTTLED" in job.events.filter(kind="throttled").first().detail
    writes = semrush.calls(path_contains="/prompts", method="POST")
    assert [c["status"] for c in writes if c["status"] == 201] == [201, 201, 201]  # each batch written once
    assert sum(c["status"] == 429 for c in writes) == job.throttles
    texts = [p["text"] for p in semrush.prompts(market.semrush_project_id)]
    assert len(texts) == len(set(texts)) == job.result["promptCount"] == 50
    assert drs.call_count() == 1  # the persisted batch was not generated again
    assert len(emf(metric_lines, "SemrushThrottled")) == job.throttles
    assert emf(metric_lines, "SemrushCallFailure") == []


def test_a_throttled_ims_exchange_spends_no_attempt_and_keeps_the_token(
    metric_lines, world, async_on, celery_worker, quick_resend
):
    """IMS answered 429 to every attempt of the exchange (it exchanged nothing): the job is sent again without
    spending its attempt, and its stored token, still good, completes it on the next delivery."""
    ims_controls.fail_next_exchanges(3, status=429)  # the client's three attempts of one exchange
    job, market = start_job(world)

    job = wait_terminal(job, timeout=60)

    assert job.status == "COMPLETED", job.error
    assert (job.attempts, job.throttles) == (1, 1)
    assert job.events.filter(kind="retry_scheduled").count() == 0
    assert "IMS_THROTTLED" in job.events.get(kind="throttled").detail
    assert len(emf(metric_lines, "IMSThrottled")) == 1
    assert drs.call_count() == 1 and len(semrush.prompts(market.semrush_project_id)) == 50


def test_a_job_throttled_for_ever_ends_throttled_too_long_and_persistent_throttling_is_counted(
    metric_lines, world, async_on, celery_worker, quick_resend, settings
):
    settings.JOB_MAX_THROTTLES = 3
    settings.JOB_THROTTLE_PERSISTENT_AFTER = 2
    drs_controls.set_concurrency_limit(0)  # DRS refuses every invocation
    job, _market = start_job(world)

    job = wait_terminal(job, timeout=45)

    assert job.status == "FAILED"
    assert job.error["code"] == "THROTTLED_TOO_LONG" and job.error["retryable"] is True
    assert "DRS_THROTTLED" in job.error["message"]
    assert job.events.filter(kind="throttled").count() == 2  # the third throttle ended it
    assert drs.call_count() == 3 and job.attempts == 1
    assert len(emf(metric_lines, "JobsThrottledPersistently")) == 2  # throttles 2 and 3
