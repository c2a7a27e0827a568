"""The shared producer (SPEC §4): dedupe, replacement, races, enqueue failure, and the job id."""

import threading
import uuid

import pytest
from django.db import OperationalError, connection

from jobs.models import AsyncJob
from markets.credentials import Generation
from markets.generation.jobtype import generation_job_id
from markets.generation.producer import market_generation_enqueue
from sandbox.ims import ledger
from serenity.auth import verify_bearer
from tests.failover import end_this_threads_backend
from tests.markets.factories import MarketFactory
from tokens import crypto
from tokens.clients import ims as ims_client
from tokens.delegation import RequestCredential
from tokens.models import PromiseGrant
from tokens.pairs import get_pair
from tokens.services import grant_holds_or_invalidate, grant_store


def test_the_job_id_matches_the_spec_test_vector():
    assert str(generation_job_id("brand-1", 2840, "en")) == "fb4b4490-6cba-43ac-87bb-42249acaac23"


def test_the_job_id_differs_per_slice_and_is_a_version_4_layout():
    ids = {
        generation_job_id("b", 2840, "en"),
        generation_job_id("b", 2840, "es"),
        generation_job_id("b", 2250, "en"),
        generation_job_id("c", 2840, "en"),
    }
    assert len(ids) == 4 and all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)


@pytest.fixture
def market(world):
    from markets.clients.semrush import SemrushClient

    project = SemrushClient(world.token).create_project(
        workspace_id=world.brand.semrush_workspace_id, name="DE", geo_target_id=2276, language_code="de"
    )
    return MarketFactory(
        brand=world.brand,
        site=world.brand.base_site,
        country="DE",
        language_code="de",
        geo_target_id=2276,
        semrush_project_id=project["id"],
    )


def enqueue(world, market, *, forwarded=None, pair="semrush"):
    """The producer, for a request whose credential is the world's IMS bearer and, with `forwarded`, the promise
    token IMS rotated for it."""
    credential = RequestCredential(
        pair=get_pair(pair), semrush_bearer=world.token, mint_bearer=world.token, promise=forwarded
    )
    generation = Generation(use_async=True, credential=credential, pair=get_pair(pair))
    return market_generation_enqueue(
        caller=verify_bearer(world.token), brand=world.brand, market=market, generation=generation
    )


def test_a_live_job_for_the_slice_is_reused_and_nothing_is_minted(world, market, queues):
    first = enqueue(world, market)
    assert first["reused"] is False and ledger.count(ledger.MINTED) == 1
    second = enqueue(world, market)
    assert second == {"jobId": first["jobId"], "status": "provisioning", "reused": True}
    assert ledger.count(ledger.MINTED) == 1
    assert AsyncJob.objects.count() == 1 and len(queues.drain()) == 1


def test_a_terminal_job_for_the_slice_is_replaced_by_a_fresh_one_with_the_same_id(world, market, queues):
    first = enqueue(world, market)
    AsyncJob.objects.filter(id=first["jobId"]).update(
        status="FAILED", error_code="PROMPT_GENERATION_HELD", error={"code": "PROMPT_GENERATION_HELD"}, attempts=3
    )
    PromiseGrant.objects.all().delete()
    queues.drain()
    second = enqueue(world, market)
    assert second == {"jobId": first["jobId"], "status": "provisioning", "reused": False}
    job = AsyncJob.objects.get(id=first["jobId"])
    assert (job.status, job.error, job.error_code, job.attempts) == ("IN_PROGRESS", None, None, 0)
    assert PromiseGrant.objects.filter(job_id=job.id).count() == 1
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [first["jobId"]]
    assert list(job.events.values_list("kind", flat=True)) == ["created", "message_sent", "replaced", "message_sent"]


def test_the_requests_promise_token_is_stored_encrypted_and_nothing_is_minted(world, market, queues):
    forwarded = ims_client.mint(bearer=world.token, pair=get_pair("semrush"))  # what IMS handed the request
    handle = enqueue(world, market, forwarded=forwarded)
    assert handle["reused"] is False and ledger.count(ledger.MINTED) == 1
    grant = PromiseGrant.objects.get(job_id=handle["jobId"])
    assert forwarded.promise_token not in grant.ciphertext
    assert crypto.unseal(grant.ciphertext).promise_token == forwarded.promise_token


def test_a_token_another_job_holds_is_never_stored_twice_nor_invalidated(world, market, queues, caplog):
    held = ims_client.mint(bearer=world.token, pair=get_pair("semrush"))
    other_job = uuid.uuid4()
    grant_store(job_id=other_job, pair=get_pair("semrush"), token=held)

    assert enqueue(world, market, forwarded=held) == {
        "jobId": None,
        "status": "failed",
        "code": "TOKEN_ALREADY_GRANTED",
        "reused": False,
    }

    assert AsyncJob.objects.count() == 0 and queues.drain() == []
    assert list(PromiseGrant.objects.values_list("job_id", flat=True)) == [other_job]
    assert ledger.count(ledger.INVALIDATED) == 0 and ledger.live_tokens() == 1
    assert any(getattr(r, "reason", None) == "TOKEN_ALREADY_GRANTED" for r in caplog.records)


def test_an_ims_mint_failure_leaves_no_job_says_so_in_a_failed_handle_and_the_doctor_lists_the_market(
    world, market, queues, caplog, workers_alive
):
    from jobs.services import doctor
    from sandbox.ims import controls

    controls.fail_next_mints(count=5, status=503)
    assert enqueue(world, market) == {"jobId": None, "status": "failed", "code": "IMS_MINT_FAILED", "reused": False}
    assert AsyncJob.objects.count() == 0 and queues.drain() == []
    assert any(getattr(r, "reason", None) == "IMS_MINT_FAILED" for r in caplog.records)
    market.refresh_from_db()
    assert market.generation_not_enqueued == "IMS_MINT_FAILED"

    (finding,) = doctor.doctor_run(apply=True, actor="test").findings
    assert (finding.kind, finding.subject, finding.fix) == (doctor.NOT_ENQUEUED, f"market {market.id}", None)
    assert "could not be enqueued (IMS_MINT_FAILED" in finding.detail
    assert f"markets/{market.id}/generation" in finding.action and "user regenerates it" in finding.action

    from tests.jobs.conftest import run

    out = run("job_regenerate", "--market", str(market.id))
    assert out.code == 1
    assert out[0] == (
        f"{market.id}  cannot re-run  {market.country}/{market.language_code}: no generation job exists (its "
        "generation could not be enqueued (IMS_MINT_FAILED)): its user regenerates it from the UI"
    )

    # The user's regeneration, IMS back, enqueues a job: the market is no longer listed.
    controls.fail_next_mints(count=0)
    assert enqueue(world, market)["status"] == "provisioning"
    assert doctor.doctor_run(apply=False, actor="test").findings == []


def mint_then_cut_the_connection(monkeypatch):
    """IMS mints (real HTTP to the simulator) and answers; then a failover cuts this thread's database
    connection, before the grant that would own the token is written."""
    real_mint = ims_client.mint

    def mint(**kwargs):
        token = real_mint(**kwargs)
        end_this_threads_backend()
        return token

    monkeypatch.setattr(ims_client, "mint", mint)


def test_a_token_minted_before_the_database_connection_was_cut_is_invalidated(world, market, queues, monkeypatch):
    mint_then_cut_the_connection(monkeypatch)

    with pytest.raises(OperationalError):
        enqueue(world, market)

    assert AsyncJob.objects.count() == 0 and PromiseGrant.objects.count() == 0 and queues.drain() == []
    minted = ledger.events(ledger.MINTED)
    assert len(minted) == 1
    assert [e["fingerprint"] for e in ledger.events(ledger.INVALIDATED)] == [minted[0]["fingerprint"]]
    assert ledger.live_tokens() == 0


def test_a_regeneration_cut_by_the_database_gives_its_lock_back_and_the_next_one_replaces_the_job(
    world, market, queues, monkeypatch
):
    first = enqueue(world, market)
    AsyncJob.objects.filter(id=first["jobId"]).update(
        status="FAILED", error_code="PROMPT_GENERATION_HELD", error={"code": "PROMPT_GENERATION_HELD"}
    )
    PromiseGrant.objects.all().delete()
    queues.drain()
    with monkeypatch.context() as patched:
        mint_then_cut_the_connection(patched)
        with pytest.raises(OperationalError):
            enqueue(world, market)

    job = AsyncJob.objects.get(id=first["jobId"])
    assert (job.status, job.reopen_lock) == ("FAILED", None)
    assert ledger.count(ledger.MINTED) == 2 and ledger.count(ledger.INVALIDATED) == 1
    assert enqueue(world, market) == {"jobId": first["jobId"], "status": "provisioning", "reused": False}
    assert ledger.live_tokens() == 2  # the first job's (its grant deleted by hand here) and the new job's
    assert PromiseGrant.objects.filter(job_id=first["jobId"]).count() == 1


def test_a_token_the_grant_holds_after_all_is_kept(world, queues):
    token = ims_client.mint(bearer=world.token, pair=get_pair("semrush"))
    job_id = uuid.uuid4()
    grant_store(job_id=job_id, pair=get_pair("semrush"), token=token)  # a commit whose answer was lost

    assert grant_holds_or_invalidate(job_id=job_id, pair=get_pair("semrush"), token=token) is True

    assert ledger.count(ledger.INVALIDATED) == 0 and ledger.live_tokens() == 1


def test_two_concurrent_producers_for_one_slice_end_with_one_job_and_one_message(world, market, queues):
    results, barrier = [], threading.Barrier(2)

    def produce():
        barrier.wait()
        try:
            results.append(enqueue(world, market))
        finally:
            connection.close()

    threads = [threading.Thread(target=produce) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(results) == 2 and all(r is not None for r in results)
    assert {r["jobId"] for r in results} == {str(generation_job_id(world.brand.id, 2276, "de"))}
    assert sorted(r["reused"] for r in results) == [False, True]
    assert AsyncJob.objects.count() == 1 and PromiseGrant.objects.count() == 1
    assert len(queues.drain()) == 1
    # A loser that had minted before losing invalidates what it minted: no live token is left behind
    # beyond the one the job holds.
    assert ledger.live_tokens() == 1


def test_sqs_unreachable_fails_the_job_and_invalidates_its_token(world, async_on, queues):
    queues.sqs.client().delete_queue(QueueUrl=queues.url)  # the send now fails
    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True},
        **{"x-promise-audience": "semrush"},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    job = AsyncJob.objects.get()
    assert body["promptGeneration"] == {
        "jobId": str(job.id),
        "status": "failed",
        "code": "ENQUEUE_FAILED",
        "reused": False,
    }
    assert body["publishState"] == "published"
    assert job.status == "FAILED" and job.error_code == "ENQUEUE_FAILED"
    assert job.error == {
        "code": "ENQUEUE_FAILED",
        "message": "The job could not be queued.",
        "retryable": True,
        "needsReauth": False,
    }
    assert PromiseGrant.objects.count() == 0
    assert ledger.count(ledger.MINTED) == 1 and ledger.count(ledger.INVALIDATED) == 1 and ledger.live_tokens() == 0
