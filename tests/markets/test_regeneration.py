"""Recovery (SPEC §12): a market whose generation ended is generated again under the same job id, through
POST …/markets/{marketId}/generation for its user, and re-run by an operator after an outage."""

import threading

import pytest
from django.db import connections
from rest_framework.test import APIClient

from jobs.models import AsyncJob
from markets.generation.jobtype import generation_job_id
from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from sandbox.ims import ledger
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.jobs.conftest import run
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_terminal
from tokens.models import PromiseGrant


def regenerate(world, market_id, *, client=None, **headers):
    client = client or world.client
    headers = {"HTTP_X_PROMISE_AUDIENCE": "semrush", **headers}
    return client.post(world.url(f"markets/{market_id}/generation"), **headers)


def held_market(world, celery_worker):
    drs_controls.set_switch("held", remaining=1)
    job, market = start_job(world)
    job = wait_terminal(job)
    assert (job.status, job.error_code) == ("FAILED", "PROMPT_GENERATION_HELD")
    return job, market


@pytest.mark.worker
def test_a_held_market_is_regenerated_and_completes_under_the_same_job_id(world, async_on, celery_worker):
    job, market = held_market(world, celery_worker)

    response = regenerate(world, market.id)

    assert response.status_code == 202, response.content
    assert response.json() == {
        "jobId": str(job.id),
        "jobType": "generateSemrushMarket",
        "status": "IN_PROGRESS",
        "reused": False,
    }
    assert response["Location"].endswith(
        f"/v2/orgs/{world.org.id}/brands/{world.brand.id}/serenity/markets/generation/jobs/{job.id}"
    )
    job = wait_terminal(job)
    assert job.status == "COMPLETED", job.error
    assert drs.call_count() == 2
    assert len(semrush.prompts(market.semrush_project_id)) == 50
    assert list(job.events.values_list("kind", flat=True)).count("replaced") == 1


def test_ten_concurrent_regenerations_make_one_job_one_message_and_one_mint(world, async_on, queues):
    job, market = start_job(world)
    AsyncJob.objects.filter(id=job.id).update(
        status="FAILED", error_code="PROMPT_GENERATION_HELD", error={"code": "PROMPT_GENERATION_HELD"}
    )
    PromiseGrant.objects.all().delete()
    queues.drain()
    ledger.clear()
    start = threading.Barrier(10)
    answers = []

    def call():
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.token}")
            start.wait(timeout=10)
            answers.append(regenerate(world, market.id, client=client))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=call) for _ in range(10)]
    [t.start() for t in threads]
    [t.join(timeout=60) for t in threads]

    assert sorted(a.status_code for a in answers) == [202] * 10
    assert sorted(a.json()["reused"] for a in answers) == [False] + [True] * 9
    assert {a.json()["jobId"] for a in answers} == {str(job.id)}
    assert AsyncJob.objects.filter(status="IN_PROGRESS").count() == 1 and PromiseGrant.objects.count() == 1
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(job.id)]
    assert ledger.count(ledger.MINTED) == 1 and ledger.live_tokens() == 1


def test_a_running_job_is_reused_and_nothing_is_minted(world, async_on, queues):
    job, market = start_job(world)
    minted = ledger.count(ledger.MINTED)

    response = regenerate(world, market.id)

    assert (response.status_code, response.json()["reused"], response.json()["jobId"]) == (202, True, str(job.id))
    assert ledger.count(ledger.MINTED) == minted


def test_a_market_of_another_brand_answers_exactly_like_a_missing_one(world, async_on, queues):
    from tests.markets.factories import BrandFactory, MarketFactory

    other = MarketFactory(brand=BrandFactory(organization=world.org))
    missing = regenerate(world, "7d1c6a49-3a0a-4a73-9d1e-0a1b2c3d4e5f")
    foreign = regenerate(world, other.id)

    assert (missing.status_code, foreign.status_code) == (404, 404)
    assert (
        missing.json()
        == foreign.json()
        == {
            "type": "https://errors.serenity.example/market-not-found",
            "title": "Market not found",
            "status": 404,
            "detail": "Market not found",
            "code": "market_not_found",
            "error": "notFound",
            "message": "Market not found",
        }
    )
    assert missing["x-error"] == foreign["x-error"] == "Market not found"


def test_regeneration_is_gated_like_the_entry_points(world, async_on, settings, gate, queues):
    job, market = start_job(world)
    AsyncJob.objects.filter(id=job.id).update(status="FAILED", error_code="PROMPT_GENERATION_EMPTY")

    settings.SERENITY_ASYNC_PROMPT_GEN = "false"
    disabled = regenerate(world, market.id)
    settings.SERENITY_ASYNC_PROMPT_GEN = "true"
    gate("false")
    not_ready = regenerate(world, market.id)
    no_audience = world.client.post(world.url(f"markets/{market.id}/generation"))

    assert (disabled.status_code, disabled.json()["code"]) == (409, "prompt_generation_disabled")
    assert (not_ready.status_code, not_ready.json()["code"]) == (503, "prompt_generation_unavailable")
    assert not_ready["Retry-After"] == "60"
    assert (no_audience.status_code, no_audience.json()["code"]) == (400, "PROMISE_PAIR_REQUIRED")
    assert AsyncJob.objects.get(id=job.id).status == "FAILED"


def test_creating_a_market_that_exists_names_it_and_its_generation_job(world, async_on, queues):
    job, market = start_job(world)

    again = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True},
        **{"x-promise-audience": "semrush"},
    )

    assert again.status_code == 409
    assert again.json()["marketId"] == str(market.id)
    assert again.json()["promptGeneration"] == {"jobId": str(job.id), "status": "IN_PROGRESS"}


# --- Operators -------------------------------------------------------------------------------------------


@pytest.mark.worker
def test_a_job_that_exhausted_its_retries_in_a_semrush_outage_is_re_run_by_an_operator_to_completed(
    world, async_on, celery_worker, settings
):
    settings.JOB_RETRY_BASE_SECONDS, settings.JOB_MAX_ATTEMPTS = 1, 2
    semrush_controls.fail_next(100, status=503, path="/prompts")  # Semrush is down for the prompt writes
    job, market = start_job(world)
    job = wait_terminal(job, timeout=45)
    assert (job.status, job.error_code, job.error["retryable"]) == ("FAILED", "RETRIES_EXHAUSTED", True)
    assert PromiseGrant.objects.filter(job_id=job.id).exists()  # retained for a re-run

    semrush_controls.reset(data=False)  # the outage is over
    dry = run("job_rerun", "--code", "RETRIES_EXHAUSTED")
    applied = run("job_rerun", "--code", "RETRIES_EXHAUSTED", "--apply")
    job = wait_terminal(job, timeout=30)

    assert dry[0].startswith(f"{job.id}  re-run  RETRIES_EXHAUSTED") and dry[0].endswith("[dry run]")
    assert applied[0].endswith("[done]") and applied[-1] == "1 of 1 retryable failed jobs re-run; 0 skipped."
    assert job.status == "COMPLETED", job.error
    assert drs.call_count() == 1  # the persisted batch was written, not generated again
    assert len(semrush.prompts(market.semrush_project_id)) == 50
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()


def test_an_operator_cannot_regenerate_a_job_that_holds_no_credential(world, async_on, queues):
    job, market = start_job(world)
    AsyncJob.objects.filter(id=job.id).update(
        status="FAILED",
        error_code="PROMPT_GENERATION_HELD",
        error={"code": "PROMPT_GENERATION_HELD", "retryable": False},
    )

    lines = run("job_regenerate", "--market", str(market.id), "--apply")

    assert lines[0].startswith(f"{market.id}  re-run generation  DE/de, job {job.id} FAILED PROMPT_GENERATION_HELD")
    assert "[skipped: only a FAILED job with a retryable error is re-run" in lines[0]
    assert AsyncJob.objects.get(id=job.id).status == "FAILED"


def test_an_operator_re_runs_a_markets_job_that_retained_its_credential(world, async_on, queues):
    job, market = start_job(world)
    AsyncJob.objects.filter(id=job.id).update(
        status="FAILED",
        error_code="RETRIES_EXHAUSTED",
        error={"code": "RETRIES_EXHAUSTED", "message": "SEMRUSH_UNAVAILABLE", "retryable": True, "needsReauth": False},
    )
    queues.drain()

    lines = run("job_regenerate", "--market", str(market.id), "--apply")

    assert lines[0].endswith("[done]") and lines.code == 0
    job.refresh_from_db()
    assert (job.status, job.attempts, job.error) == ("IN_PROGRESS", 0, None)
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(job.id)]
    assert generation_job_id(world.brand.id, market.geo_target_id, "de") == job.id

    again = run("job_regenerate", "--market", str(market.id), "--apply")

    assert again[0] == f"{market.id}  already running  DE/de, job {job.id} IN_PROGRESS: nothing to do"
    assert again.code == 0 and queues.drain() == []


@pytest.mark.django_db
def test_regenerating_a_market_that_does_not_exist_never_counts_it_as_found():
    import uuid

    ghost = uuid.uuid4()

    dry = run("job_regenerate", "--market", str(ghost))

    assert dry == [
        f"market {ghost}  not found (deleted, or never created)",
        "No markets to re-run found; 1 named market(s) do not exist (see above).",
    ]
    assert dry.code == 1


def test_an_operator_cannot_re_run_a_deleted_markets_job_even_once_its_slice_is_created_again(world, async_on, queues):
    from markets.models import Market

    job, market = start_job(world)
    assert world.client.delete(world.url(f"markets/{market.geo_target_id}/de")).status_code == 204
    again = world.post(world.url("markets"), {**world.brand_fields, "market": "DE", "languageCode": "de"})
    new_market = Market.objects.get(id=again.json()["id"])  # created again, this time without generation

    deleted = run("job_regenerate", "--market", str(market.id), "--apply")
    recreated = run("job_regenerate", "--market", str(new_market.id), "--apply")
    rerun = run("job_rerun", "--job", str(job.id), "--apply")

    assert deleted[0] == f"market {market.id}  not found (deleted, or never created)" and deleted.code == 1
    assert recreated[0] == (
        f"{new_market.id}  cannot re-run  DE/de, job {job.id}: the job is of an earlier market of this slice, deleted "
        "since (FAILED MARKET_DELETED): its user starts this market's generation from the UI"
    )
    assert recreated.code == 1
    assert rerun[0].startswith(f"{job.id}  cannot re-run  it was cancelled (MARKET_DELETED: ") and rerun.code == 1
    job.refresh_from_db()
    assert (job.status, job.error_code) == ("FAILED", "MARKET_DELETED")
