"""POST …/serenity/markets/generation/jobs/{jobId}/reauth: who may, when, and what leaves the process."""
import json
import threading
import uuid

import pytest
from django.db import connections
from django.test import Client

from jobs.models import AsyncJob
from tests.api.conftest import REQUESTER, Api, make_job, needs_reauth_fields
from tokens.models import PromiseGrant
from tokens.services import grant_load


def problem(status: int, code: str, title: str, detail: str) -> dict:
    return {"type": "https://errors.serenity.example/" + code.replace("_", "-"), "title": title, "status": status,
            "detail": detail, "code": code}


def awaiting_job(world, **fields):
    return make_job(org=world.org, brand=world.brand, site=world.site, **{**needs_reauth_fields(), **fields})


def assert_still_awaiting_reauth(job):
    job.refresh_from_db()
    assert (job.status, job.error_code, job.error["needsReauth"]) == ("FAILED", "NEEDS_REAUTH", True)
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()


def test_the_requester_reauthorises_and_the_same_job_is_queued_again(world, api, ims, queues):
    job = awaiting_job(world, attempts=3)

    response = api.reauth(world.org.id, world.brand.id, job.id)

    assert response.status_code == 202
    assert response.json() == {"jobId": str(job.id), "jobType": "generateSemrushMarket", "status": "IN_PROGRESS"}
    job.refresh_from_db()
    assert (job.status, job.error, job.error_code, job.attempts) == ("IN_PROGRESS", None, None, 0)
    assert job.message_sent_at is not None
    pair, token = grant_load(job.id)
    assert pair.name == "semrush"
    assert [e["fingerprint"] for e in ims.events("minted")] == [ims.fingerprint(token.promise_token)]
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "generateSemrushMarket"}]


def test_a_forwarded_promise_token_is_stored_and_nothing_is_minted(world, api, ims, queues):
    job = awaiting_job(world)
    forwarded = json.dumps({"promise_token": "forwarded-promise-value", "token_type": "promise_token",
                            "expires_in": 3600})

    response = api.reauth(world.org.id, world.brand.id, job.id, **{"x-promise-token": forwarded})

    assert response.status_code == 202
    assert response.json() == {"jobId": str(job.id), "jobType": "generateSemrushMarket", "status": "IN_PROGRESS"}
    _pair, token = grant_load(job.id)
    assert (token.promise_token, token.expires_in) == ("forwarded-promise-value", 3600)
    assert ims.count("minted") == 0
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(job.id)]


def test_reauth_by_another_user_is_forbidden(world, bearer, ims, queues):
    job = awaiting_job(world)
    other = Api(bearer(user_id="someone-else", org_ids=[world.org.ims_org_id]))

    response = other.reauth(world.org.id, world.brand.id, job.id)

    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == problem(403, "not_job_requester",
                                      "Only the user who started the job may re-authorise it",
                                      "Only the user who started the job may re-authorise it")
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0
    assert queues.drain() == []


def test_reauth_of_a_job_without_a_recorded_user_is_forbidden(world, api, ims, queues):
    job = awaiting_job(world, user_id=None)

    response = api.reauth(world.org.id, world.brand.id, job.id)

    assert response.status_code == 403
    assert response.json()["code"] == "not_job_requester"
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0


@pytest.mark.parametrize("state", [
    {"status": "COMPLETED", "result": {"promptCount": 3, "projectId": "p", "published": True, "verdict": "ship"}},
    {"status": "IN_PROGRESS"},
    {"status": "FAILED", "error_code": "PROMPT_GENERATION_HELD",
     "error": {"code": "PROMPT_GENERATION_HELD", "message": "held", "retryable": False, "needsReauth": False}},
], ids=["completed", "in progress", "failed for another reason"])
def test_reauth_of_a_job_not_awaiting_it_is_a_conflict(world, api, ims, queues, state):
    job = make_job(org=world.org, brand=world.brand, site=world.site, **state)

    response = api.reauth(world.org.id, world.brand.id, job.id)

    assert response.status_code == 409
    assert response.json() == problem(409, "job_not_awaiting_reauth", "Job is not awaiting re-authentication",
                                      f"Job {job.id} is {state['status']}.")
    job.refresh_from_db()
    assert job.status == state["status"]
    assert ims.count("minted") == 0
    assert queues.drain() == []


def test_reauth_without_the_semrush_audience_is_refused(world, api, ims):
    job = awaiting_job(world)

    response = api.reauth(world.org.id, world.brand.id, job.id, audience=None)

    assert response.status_code == 400
    assert response.json() == problem(400, "PROMISE_PAIR_REQUIRED", "The Semrush client pair is required",
                                      "Send `x-promise-audience: semrush` to re-authorise a generation job.")
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0


def test_reauth_with_an_unknown_audience_is_refused(world, api, ims):
    job = awaiting_job(world)

    response = api.reauth(world.org.id, world.brand.id, job.id, audience="marketo")

    assert response.status_code == 400
    assert response.json() == problem(400, "invalid_promise_audience", "Unknown x-promise-audience",
                                      "x-promise-audience must be `semrush`.")
    assert_still_awaiting_reauth(job)


def test_the_semrush_audience_is_trimmed_and_case_insensitive(world, api, ims, queues):
    job = awaiting_job(world)

    response = api.reauth(world.org.id, world.brand.id, job.id, audience="  SemRush ")

    assert response.status_code == 202


def test_an_ims_mint_failure_answers_502_and_the_job_still_awaits_reauth(world, api, ims, queues):
    from serenity.sandbox.ims import controls

    job = awaiting_job(world)
    controls.fail_next_mints(2, 503)  # the client retries a 5xx mint once

    response = api.reauth(world.org.id, world.brand.id, job.id)

    assert response.status_code == 502
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == problem(502, "credential_unavailable", "IMS did not issue a credential",
                                      "The job still awaits re-authorisation; try again.")
    assert_still_awaiting_reauth(job)
    assert ims.count("minted") == 0
    assert [e["status"] for e in ims.events("refused")] == [503, 503]
    assert queues.drain() == []


def test_a_malformed_forwarded_token_is_refused_and_the_job_still_awaits_reauth(world, api, ims, queues):
    job = awaiting_job(world)

    response = api.reauth(world.org.id, world.brand.id, job.id,
                          **{"x-promise-token": '{"promise_token": "", "token_type": "promise_token"}'})

    assert response.status_code == 400
    assert response.json() == problem(400, "invalid_promise_token", "x-promise-token is not a usable promise token",
                                      "x-promise-token is not a usable promise token")
    assert_still_awaiting_reauth(job)
    assert queues.drain() == []


def test_reauth_with_a_non_uuid_job_id_answers_400(world, api):
    response = api.reauth(world.org.id, world.brand.id, "12345")

    assert response.status_code == 400
    assert response.json()["errors"] == [{"parameter": "jobId", "code": "invalid_uuid", "message": "Must be a UUID."}]


def test_reauth_of_a_missing_job_answers_the_same_404_as_polling_it(world, api):
    missing = uuid.uuid4()

    response = api.reauth(world.org.id, world.brand.id, missing)

    assert response.status_code == 404
    assert response.content == api.poll(world.org.id, world.brand.id, missing).content


def test_of_twenty_concurrent_reauthorisations_exactly_one_wins(world, caller_token, ims, queues):
    job = awaiting_job(world)
    start = threading.Barrier(20)
    statuses: list[int] = []

    def reauthorise():
        try:
            start.wait(timeout=10)
            statuses.append(Api(caller_token, Client()).reauth(world.org.id, world.brand.id, job.id).status_code)
        finally:
            connections.close_all()  # each thread had its own connection

    threads = [threading.Thread(target=reauthorise) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert sorted(statuses) == [202] + [409] * 19
    job.refresh_from_db()
    assert job.status == "IN_PROGRESS"
    assert AsyncJob.objects.get(id=job.id).events.filter(kind="reauthorized").count() == 1
    assert ims.count("minted") == 1
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "generateSemrushMarket"}]


def test_reauth_is_recorded_in_the_job_history_under_the_requester(world, api, ims, queues):
    job = awaiting_job(world)

    api.reauth(world.org.id, world.brand.id, job.id)

    assert list(job.events.values_list("kind", "actor")) == [("reauthorized", REQUESTER), ("message_sent", "")]
