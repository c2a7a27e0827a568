"""The promise-token lifecycle under rotation (SPEC §11), through the entry points, the real queue and a real
worker: one owner per token, no blind retry of a rotating call, IMS only when Semrush is about to be called,
rotations stored fenced, forwarded tokens bound to the caller."""

import json
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.context import JobContext
from jobs.exceptions import JobFailed, LeaseLost
from jobs.leases import lease_claim
from jobs.models import AsyncJob
from markets.generation import handler as handler_module
from markets.generation.handler import MarketGenerationHandler
from markets.models import Market
from sandbox.drs import controls as drs_controls
from sandbox.ims import controls as ims_controls
from sandbox.ims import ledger
from sandbox.semrush import state as semrush
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_terminal, wait_until
from tokens import services as grants
from tokens.clients import ims as ims_client
from tokens.models import PromiseGrant
from tokens.pairs import get_pair


def browser_token(bearer_value: str) -> dict:
    """A promise token the browser holds, minted at the IMS simulator for the bearer's user."""
    return ims_client.mint(bearer=bearer_value, pair=get_pair("semrush")).as_dict()


def header(token: dict) -> str:
    return json.dumps(token)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fingerprint(token: dict) -> str:
    return ledger.fingerprint(token["promise_token"])


@pytest.mark.worker
def test_a_forwarded_token_serves_one_market_of_an_activation_and_the_others_mint_their_own(
    world, async_on, celery_worker
):
    forwarded = browser_token(world.token)
    drs_controls.set_latency(1500)  # keep the jobs running while their grants are read

    response = world.post(
        world.url("activate"),
        {
            **world.brand_fields,
            "markets": [{"market": m, "languageCode": lang} for m, lang in (("FR", "fr"), ("DE", "de"), ("ES", "es"))],
            "generatePrompts": True,
        },
        **{"x-promise-audience": "semrush", "x-promise-token": header(forwarded)},
    )

    assert response.status_code == 200, response.content
    job_ids = [entry["body"]["promptGeneration"]["jobId"] for entry in response.json()["markets"]]
    fingerprints_while_running = set(PromiseGrant.objects.values_list("fingerprint", flat=True))
    assert len(fingerprints_while_running) == 3
    # The request exchanged the browser's token once: the first market's job holds the token IMS rotated for it
    # (no one else does), and the other two jobs hold tokens minted from the access token it got.
    (request_exchange,) = [e for e in ledger.events("exchanged") if e["fingerprint"] == fingerprint(forwarded)]
    (rotated,) = [
        e["fingerprint"] for e in ledger.events("rotated_to") if e["replaces"] == request_exchange["fingerprint"]
    ]
    first_job_grant = PromiseGrant.objects.get(job_id=job_ids[0])
    assert grants.grant_load(first_job_grant.job_id).token.promise_token != forwarded["promise_token"]
    assert ledger.count(ledger.MINTED) == 1 + 2  # the browser's own, then one per other market
    jobs = [wait_terminal(AsyncJob.objects.get(id=job_id), timeout=45) for job_id in job_ids]
    assert [job.status for job in jobs] == ["COMPLETED"] * 3, [job.error for job in jobs]
    assert rotated in [e["fingerprint"] for e in ledger.events("exchanged")]  # exchanged again by its job
    assert ledger.count(ledger.EXCHANGED) == 1 + 3
    assert ledger.count(ledger.REFUSED) == 0
    for job in jobs:
        assert len(semrush.prompts(job.result["projectId"])) == 50


@pytest.mark.parametrize("owner_org", ["same org", "another org"])
def test_a_forwarded_token_of_another_user_is_refused_before_anything_is_created(
    world, async_on, bearer, queues, owner_org
):
    someone_else = bearer(
        user_id="user-2",
        org_ids=[world.org.ims_org_id if owner_org == "same org" else "FFFFFFFFFFFFFFFFFFFFFFFF@AdobeOrg"],
    )
    forwarded = browser_token(someone_else)

    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True},
        **{"x-promise-audience": "semrush", "x-promise-token": header(forwarded)},
    )

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert (response.json()["code"], response.json()["message"]) == (
        "promise_token_rejected",
        "Invalid or expired promise token",
    )
    assert not Market.objects.exists() and not AsyncJob.objects.exists() and not PromiseGrant.objects.exists()
    assert queues.drain() == []
    # IMS rotated B's token on the exchange; the rotated one was invalidated at once: nothing of B's is left live.
    assert ledger.count(ledger.EXCHANGED) == 1 and ledger.live_tokens() == 0


@pytest.mark.parametrize("expires_in", ["1e20", "1000000000000", '"100000000000000000000000000000"', "-5"])
@pytest.mark.parametrize("entry", ["markets", "activate"])
def test_a_forwarded_token_claiming_an_absurd_lifetime_is_a_400_and_nothing_is_half_created(
    world, async_on, queues, expires_in, entry
):
    forwarded = f'{{"promise_token": "x.y.z", "token_type": "promise_token", "expires_in": {expires_in}}}'
    body = (
        {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True}
        if entry == "markets"
        else {**world.brand_fields, "markets": [{"market": "DE", "languageCode": "de"}], "generatePrompts": True}
    )

    response = world.post(world.url(entry), body, **{"x-promise-audience": "semrush", "x-promise-token": forwarded})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_promise_token"
    assert not Market.objects.exists() and not AsyncJob.objects.exists()
    assert ledger.events() == []


def test_a_forwarded_token_of_another_token_type_is_refused(world, async_on, queues):
    forwarded = {**browser_token(world.token), "token_type": "bearer"}

    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True},
        **{"x-promise-audience": "semrush", "x-promise-token": header(forwarded)},
    )

    assert (response.status_code, response.json()["code"]) == (400, "invalid_promise_token")
    assert not Market.objects.exists()


@pytest.mark.worker
def test_ims_refusing_connections_for_two_deliveries_delays_the_job_but_it_completes(
    world, async_on, celery_worker, settings
):
    settings.JOB_RETRY_BASE_SECONDS = 1
    reachable = settings.IMS_HOST
    job, _market = start_job(world)  # the entry point mints while IMS is still reachable
    settings.IMS_HOST = f"http://127.0.0.1:{closed_port()}"

    wait_until(lambda: job.events.filter(kind="retry_scheduled").count() >= 2, timeout=30)
    settings.IMS_HOST = reachable
    job = wait_terminal(job, timeout=30)

    assert job.status == "COMPLETED", job.error
    assert job.attempts == 3
    assert [e.detail.split(":")[0] for e in job.events.filter(kind="retry_scheduled")] == ["IMS_UNAVAILABLE"] * 2
    assert "exchangeInDoubt" not in job.checkpoints
    assert ledger.count(ledger.EXCHANGED) == 1 and ledger.count(ledger.REFUSED) == 0


@pytest.mark.worker
def test_a_lost_exchange_answer_is_not_retried_in_place_and_ends_the_job_awaiting_reauthorisation(
    world, async_on, celery_worker, settings
):
    from tests.markets.generation.conftest import Api

    settings.JOB_RETRY_BASE_SECONDS = 1
    ims_controls.lose_next_exchange_answers(count=1, status=500)
    job, market = start_job(world)

    job = wait_terminal(job, timeout=30)

    assert (job.status, job.error_code, job.error["needsReauth"]) == ("FAILED", "NEEDS_REAUTH", True)
    assert "lost rotation" in job.error["message"]
    # One exchange per delivery: the one whose answer was lost, then the stored (rotated-away) token once.
    assert [e["kind"] for e in ledger.events() if e["operation"] == "exchange"] == [
        "exchanged",
        "rotated_to",
        "answer_lost",
        "refused",
    ]
    assert job.attempts == 2
    assert semrush.prompts(market.semrush_project_id) == []

    api = Api(world.token)
    accepted = api.reauth(world.org.id, world.brand.id, job.id)
    assert accepted.status_code == 202, accepted.content
    job = wait_terminal(job, timeout=30)
    assert job.status == "COMPLETED", job.error
    assert len(semrush.prompts(market.semrush_project_id)) == 50


def test_the_public_answer_for_a_lost_rotation_is_the_usual_needs_reauth(world, async_on, settings, queues):
    from markets.generation.dto import job_dto

    job, _market = start_job(world)
    AsyncJob.objects.filter(id=job.id).update(
        status="FAILED",
        error_code="NEEDS_REAUTH",
        ended_at=timezone.now(),
        error={
            "code": "NEEDS_REAUTH",
            "message": "IMS refused the promise token: lost rotation (...)",
            "retryable": False,
            "needsReauth": True,
        },
    )
    job.refresh_from_db()

    assert job_dto(job)["error"] == {
        "code": "NEEDS_REAUTH",
        "message": "Authorisation to write to Semrush has expired. Re-authorise to continue.",
        "retryable": False,
        "needsReauth": True,
    }


@pytest.mark.worker
def test_a_job_already_written_and_published_completes_without_calling_ims(
    world, async_on, settings, queues, transactional_db, caplog
):
    job, market = start_job(world)  # queued; no worker yet
    AsyncJob.objects.filter(id=job.id).update(
        checkpoints={
            "batch": {"prompts": [{"prompt": "Welche Jacke?", "category": ""}], "summary": {}},
            "batchSize": 1,
            "projectId": market.semrush_project_id,
            "written": 1,
            "published": True,
        },
        phase="published",
    )
    ledger.clear()
    settings.IMS_HOST = f"http://127.0.0.1:{closed_port()}"  # IMS is down

    from celery.contrib.testing.worker import start_worker

    from serenity.celery import app

    with start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING"):
        job = wait_terminal(job, timeout=30)

    assert job.status == "COMPLETED", job.error
    assert job.attempts == 1
    assert job.result == {
        "promptCount": 1,
        "projectId": market.semrush_project_id,
        "published": True,
        "verdict": "ship",
    }
    assert ledger.events() == []
    assert not [r for r in caplog.records if getattr(r, "call", "") == "ims.exchange"]


def claimed(job) -> JobContext:
    return JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id, worker="first"))


def test_a_worker_losing_its_lease_right_after_an_exchange_leaves_no_live_unowned_token(
    world, async_on, queues, monkeypatch
):
    job, market = start_job(world)
    run = claimed(job)
    run.checkpoint(phase="generated", batch={"prompts": [{"prompt": "Welche Jacke?", "category": ""}], "summary": {}})
    real_exchange = grants.promise_exchange

    def exchange_then_lose_the_lease(**kwargs):
        exchanged = real_exchange(**kwargs)
        AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert lease_claim(job.id, worker="second") is not None
        return exchanged

    monkeypatch.setattr(handler_module.grants, "promise_exchange", exchange_then_lose_the_lease)

    with pytest.raises(LeaseLost):
        MarketGenerationHandler().run(run)

    rotated = ledger.events("rotated_to")[0]["fingerprint"]
    assert [e["fingerprint"] for e in ledger.events("invalidated")] == [rotated]
    assert ledger.live_tokens() == 0
    assert semrush.prompts(market.semrush_project_id) == []
    assert AsyncJob.objects.get(id=job.id).events.filter(kind="lease_lost", detail="token rotation").count() == 1


def test_a_job_whose_token_turns_out_to_be_another_users_never_writes_to_semrush(world, async_on, queues, bearer):
    job, market = start_job(world)
    foreign = ims_client.mint(bearer=bearer(user_id="user-2", org_ids=[world.org.ims_org_id]), pair=get_pair("semrush"))
    PromiseGrant.objects.filter(job_id=job.id).delete()
    grants.grant_store(job_id=job.id, pair=get_pair("semrush"), token=foreign)  # as if it had slipped through
    run = claimed(job)
    run.checkpoint(phase="generated", batch={"prompts": [{"prompt": "Welche Jacke?", "category": ""}], "summary": {}})

    with pytest.raises(JobFailed) as ended:
        MarketGenerationHandler().run(run)

    assert (ended.value.code, ended.value.needs_reauth) == ("NEEDS_REAUTH", True)
    assert "another user" in ended.value.message
    assert semrush.calls(path_contains=f"{market.semrush_project_id}/prompts") == []
    assert len(semrush.calls(path_contains=f"{market.semrush_project_id}/publish")) == 1  # at creation only
    rotated = ledger.events("rotated_to")[-1]["fingerprint"]
    assert rotated in [e["fingerprint"] for e in ledger.events("invalidated")]
