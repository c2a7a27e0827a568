"""POST …/serenity/markets/generation/jobs/{jobId}/reauth: who may, when, and what leaves the process."""

import json
import threading
import time
import uuid
from datetime import timedelta
from urllib.parse import quote

import httpx
import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone

from jobs.models import AsyncJob
from tests.markets.generation.conftest import CALLER_ORG, OTHER_ORG, REQUESTER, Api, make_job, needs_reauth_fields
from tokens.clients import ims as ims_client
from tokens.models import PromiseGrant
from tokens.pairs import get_pair
from tokens.services import grant_load


def problem(status: int, code: str, title: str, detail: str) -> dict:
    from serenity.problems import error_token

    return {
        "type": "https://errors.serenity.example/" + code.replace("_", "-"),
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        "error": error_token(code, status),
        "message": detail,
    }


def awaiting_job(tenants, **fields):
    return make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **{**needs_reauth_fields(), **fields})


def assert_still_awaiting_reauth(job):
    job.refresh_from_db()
    assert (job.status, job.error_code, job.error["needsReauth"]) == ("FAILED", "NEEDS_REAUTH", True)
    assert job.reopen_lock is None
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()


def browser_token(bearer_value: str, pair: str = "semrush") -> tuple[str, str]:
    """A promise token minted at the IMS simulator for the bearer's user, as the browser would forward it:
    (the x-promise-token header, the token value)."""
    token = ims_client.mint(bearer=bearer_value, pair=get_pair(pair))
    return json.dumps(token.as_dict()), token.promise_token


def test_the_requester_reauthorises_and_the_same_job_is_queued_again(tenants, api, ims, queues):
    job = awaiting_job(tenants, attempts=3)

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 202
    assert response.json() == {"jobId": str(job.id), "jobType": "generateSemrushMarket", "status": "IN_PROGRESS"}
    job.refresh_from_db()
    assert (job.status, job.error, job.error_code, job.attempts) == ("IN_PROGRESS", None, None, 0)
    assert job.message_sent_at is not None
    loaded = grant_load(job.id)
    assert loaded.pair.name == "semrush"
    assert [e["fingerprint"] for e in ims.events("minted")] == [ims.fingerprint(loaded.token.promise_token)]
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "generateSemrushMarket"}]


@pytest.mark.parametrize("form", ["typed", "bare"])
def test_a_forwarded_promise_token_is_exchanged_and_the_job_gets_the_rotated_one(tenants, api, ims, queues, form):
    job = awaiting_job(tenants)
    forwarded, value = browser_token(api.token)
    header = forwarded if form == "typed" else quote(value, safe="")

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, **{"x-promise-token": header})

    assert response.status_code == 202
    assert response.json() == {"jobId": str(job.id), "jobType": "generateSemrushMarket", "status": "IN_PROGRESS"}
    stored = grant_load(job.id).token
    assert stored.promise_token != value  # the forwarded token was rotated away: the job owns its successor
    assert ims.count("minted") == 1 and ims.count("exchanged") == 1 and ims.live_tokens() == 1
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(job.id)]


@pytest.mark.parametrize("owner", ["same org", "another org"])
def test_a_forwarded_token_of_another_user_is_refused_and_nothing_is_stored(tenants, api, bearer, ims, queues, owner):
    job = awaiting_job(tenants)
    someone_else = bearer(user_id="someone-else", org_ids=[CALLER_ORG if owner == "same org" else OTHER_ORG])
    forwarded, _value = browser_token(someone_else)

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, **{"x-promise-token": forwarded})

    assert response.status_code == 401
    assert response.json() == problem(
        401, "promise_token_rejected", "Invalid or expired promise token", "Invalid or expired promise token"
    )
    assert_still_awaiting_reauth(job)
    # The exchange rotated the other user's token; the rotated one was invalidated: nothing left live.
    assert ims.count("minted") == 1 and ims.live_tokens() == 0
    assert queues.drain() == []


def test_a_forwarded_token_of_the_default_pair_is_refused(tenants, api, ims, queues):
    job = awaiting_job(tenants)
    forwarded, _value = browser_token(api.token, pair="default")

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, **{"x-promise-token": forwarded})

    assert response.status_code == 401
    assert response.json()["message"] == "Invalid or expired promise token"
    assert_still_awaiting_reauth(job)


@pytest.mark.parametrize("expires_in", ["1e20", "1000000000000", '"100000000000000000000000000000"'])
def test_a_forwarded_token_claiming_an_absurd_lifetime_is_refused(tenants, api, ims, queues, expires_in):
    job = awaiting_job(tenants)
    forwarded = f'{{"promise_token": "some-value", "token_type": "promise_token", "expires_in": {expires_in}}}'

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, **{"x-promise-token": forwarded})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_promise_token"
    assert_still_awaiting_reauth(job)
    assert ims.events() == []


def test_reauth_by_another_user_is_forbidden(tenants, bearer, ims, queues):
    job = awaiting_job(tenants)
    other = Api(bearer(user_id="someone-else", org_ids=[tenants.org.ims_org_id]))

    response = other.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == problem(
        403,
        "not_job_requester",
        "Only the user who started the job may re-authorise it",
        "Only the user who started the job may re-authorise it",
    )
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0
    assert queues.drain() == []


def test_reauth_of_a_job_without_a_recorded_user_is_forbidden(tenants, api, ims, queues):
    job = awaiting_job(tenants, user_id=None)

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 403
    assert response.json()["code"] == "not_job_requester"
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0


@pytest.mark.parametrize(
    "state",
    [
        {"status": "COMPLETED", "result": {"promptCount": 3, "projectId": "p", "published": True, "verdict": "ship"}},
        {"status": "IN_PROGRESS"},
        {
            "status": "FAILED",
            "error_code": "PROMPT_GENERATION_HELD",
            "error": {"code": "PROMPT_GENERATION_HELD", "message": "held", "retryable": False, "needsReauth": False},
        },
    ],
    ids=["completed", "in progress", "failed for another reason"],
)
def test_reauth_of_a_job_not_awaiting_it_is_a_conflict(tenants, api, ims, queues, state):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **state)

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 409
    assert response.json() == problem(
        409, "job_not_awaiting_reauth", "Job is not awaiting re-authentication", f"Job {job.id} is {state['status']}."
    )
    job.refresh_from_db()
    assert job.status == state["status"]
    assert ims.count("minted") == 0
    assert queues.drain() == []


def test_reauth_without_the_semrush_audience_is_refused(tenants, api, ims):
    job = awaiting_job(tenants)

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, audience=None)

    assert response.status_code == 400
    assert response.json() == problem(
        400,
        "PROMISE_PAIR_REQUIRED",
        "The Semrush client pair is required",
        "Re-authentication requires the Semrush promise pair (x-promise-audience: semrush)",
    )
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0


def test_reauth_with_an_unknown_audience_is_refused(tenants, api, ims):
    job = awaiting_job(tenants)

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, audience="marketo")

    assert response.status_code == 400
    assert response.json() == problem(
        400, "invalid_promise_audience", "Unknown x-promise-audience", "Unknown promise audience: marketo"
    )
    assert_still_awaiting_reauth(job)


def test_the_semrush_audience_is_trimmed_and_case_insensitive(tenants, api, ims, queues):
    job = awaiting_job(tenants)

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, audience="  SemRush ")

    assert response.status_code == 202


def test_an_ims_mint_failure_answers_502_and_the_job_still_awaits_reauth(tenants, api, ims, queues):
    from sandbox.ims import controls

    job = awaiting_job(tenants)
    controls.fail_next_mints(1, 503)  # a mint is not retried after an answer that may follow a mint

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 502
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == problem(
        502,
        "credential_unavailable",
        "IMS did not issue a credential",
        "The job still awaits re-authorisation; try again.",
    )
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0
    assert [e["status"] for e in ims.events("refused")] == [503]
    assert queues.drain() == []


def test_a_claim_left_by_a_dead_request_expires_and_the_next_reauthorisation_wins(tenants, api, ims, queues):
    import uuid as _uuid

    job = awaiting_job(
        tenants, reopen_lock=_uuid.uuid4(), reopen_lock_expires_at=timezone.now() + timedelta(seconds=30)
    )
    assert api.reauth(tenants.org.id, tenants.brand.id, job.id).status_code == 409

    AsyncJob.objects.filter(id=job.id).update(reopen_lock_expires_at=timezone.now() - timedelta(seconds=1))
    response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 202
    job.refresh_from_db()
    assert (job.status, job.reopen_lock, job.reopen_lock_expires_at) == ("IN_PROGRESS", None, None)


def test_a_credential_obtained_after_the_claim_was_lost_is_invalidated_and_the_job_left_alone(
    tenants, api, ims, queues, monkeypatch
):
    from jobs import services as job_services
    from jobs.exceptions import NotAwaitingReauth

    job = awaiting_job(tenants)
    real_mint = ims_client.mint

    def slow_mint(**kwargs):
        token = real_mint(**kwargs)
        # Meanwhile the claim expired and another request took it.
        AsyncJob.objects.filter(id=job.id).update(reopen_lock=uuid.uuid4())
        return token

    monkeypatch.setattr(ims_client, "mint", slow_mint)

    with pytest.raises(NotAwaitingReauth):
        job_services.job_reauthorize(
            job_id=job.id,
            user_id=REQUESTER,
            pair=get_pair("semrush"),
            obtain_token=lambda: ims_client.mint(bearer=api.token, pair=get_pair("semrush")),
        )

    job.refresh_from_db()
    assert (job.status, job.error_code) == ("FAILED", "NEEDS_REAUTH")
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims.count("minted") == ims.count("invalidated") == 1
    assert ims.live_tokens() == 0
    assert queues.drain() == []


def test_a_credential_minted_before_the_database_connection_was_cut_is_invalidated_and_the_job_still_awaits_reauth(
    tenants, api, ims, queues, monkeypatch
):
    from tests.failover import end_this_threads_backend

    job = awaiting_job(tenants)
    real_mint = ims_client.mint

    def mint_then_cut(**kwargs):
        token = real_mint(**kwargs)
        end_this_threads_backend()  # a failover, before the grant that would own the token is written
        return token

    with monkeypatch.context() as patched:
        patched.setattr(ims_client, "mint", mint_then_cut)
        response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == ims.count("invalidated") == 1
    assert ims.live_tokens() == 0
    assert queues.drain() == []
    # The claim was given back: the user's next try wins at once.
    assert api.reauth(tenants.org.id, tenants.brand.id, job.id).status_code == 202


def test_a_malformed_forwarded_token_is_refused_and_the_job_still_awaits_reauth(tenants, api, ims, queues):
    job = awaiting_job(tenants)

    response = api.reauth(
        tenants.org.id,
        tenants.brand.id,
        job.id,
        **{"x-promise-token": '{"promise_token": "", "token_type": "promise_token"}'},
    )

    assert response.status_code == 400
    assert response.json() == problem(
        400,
        "invalid_promise_token",
        "x-promise-token is not a usable promise token",
        "promise_token must be a non-empty string",
    )
    assert_still_awaiting_reauth(job)
    assert queues.drain() == []


def test_reauth_with_a_non_uuid_job_id_answers_400(tenants, api):
    response = api.reauth(tenants.org.id, tenants.brand.id, "12345")

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"parameter": "jobId", "code": "invalid_uuid", "message": "Job Id is invalid. Please provide a valid UUID."}
    ]


def test_reauth_of_a_missing_job_answers_the_same_404_as_polling_it(tenants, api):
    missing = uuid.uuid4()

    response = api.reauth(tenants.org.id, tenants.brand.id, missing)

    assert response.status_code == 404
    assert response.content == api.poll(tenants.org.id, tenants.brand.id, missing).content


def test_of_twenty_four_concurrent_reauthorisations_one_wins_and_the_losers_never_wait_for_its_mint(
    tenants, caller_token, ims, queues, sims
):
    from sandbox.ims import controls

    # A slow IMS: the winner's mint takes seconds. Each loser notes how many tokens IMS had minted when its
    # answer came back: none, if it never waited for the winner.
    controls.set_latency(5000)
    job = awaiting_job(tenants)
    start = threading.Barrier(24)
    answers: list[tuple[int, int]] = []  # (status, tokens minted when it answered), in the order they came
    answers_lock = threading.Lock()
    health: list[int] = []
    done = threading.Event()

    def reauthorise():
        try:
            start.wait(timeout=30)
            status = Api(caller_token, Client()).reauth(tenants.org.id, tenants.brand.id, job.id).status_code
            minted = ims.count("minted")
            with answers_lock:
                answers.append((status, minted))
        finally:
            connections.close_all()  # each thread had its own connection

    def probe_health():
        while not done.is_set():
            health.append(httpx.get(f"{sims.url}/healthz", timeout=30).status_code)
            time.sleep(0.05)

    prober = threading.Thread(target=probe_health)
    prober.start()
    threads = [threading.Thread(target=reauthorise) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    done.set()
    prober.join()

    assert sorted(status for status, _ in answers) == [202] + [409] * 23
    assert [minted for status, minted in answers if status == 409] == [0] * 23
    assert answers[-1][0] == 202  # every loser was answered before the winner
    assert health and set(health) == {200}
    job.refresh_from_db()
    assert job.status == "IN_PROGRESS"
    assert AsyncJob.objects.get(id=job.id).events.filter(kind="reauthorized").count() == 1
    assert ims.count("minted") == 1 and ims.live_tokens() == 1
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "generateSemrushMarket"}]


def test_reauth_is_recorded_in_the_job_history_under_the_requester(tenants, api, ims, queues):
    job = awaiting_job(tenants)

    api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert list(job.events.values_list("kind", "actor")) == [("reauthorized", REQUESTER), ("message_sent", "")]


def test_reauthorisations_past_the_users_limit_get_a_429(tenants, caller_token, throttle_rates):
    throttle_rates(reauth="2/min")
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, status="COMPLETED")
    api = Api(caller_token)

    statuses = [api.reauth(tenants.org.id, tenants.brand.id, job.id).status_code for _ in range(3)]

    assert statuses == [409, 409, 429]
