"""No poll or re-auth answer, in any state, carries a token or a stored value outside the DTO's allow-list."""

import json

import pytest

from jobs.models import JobStatus
from tests.markets.generation.conftest import SECRET, Api, make_job, needs_reauth_fields
from tokens.clients import ims as ims_client
from tokens.pairs import get_pair
from tokens.services import grant_load, grant_store
from tokens.types import PromiseToken

DTO_KEYS = {"jobId", "jobType", "status", "result", "error", "createdAt", "updatedAt", "progress"}
STORED_GRANT = "STORED-GRANT-TOKEN-5d1e"
FORWARDED = "FORWARDED-PROMISE-TOKEN-88ab"


def wire_bytes(response) -> bytes:
    """Everything the client receives: status line material, headers and body."""
    headers = "\n".join(f"{name}: {value}" for name, value in response.items())
    return headers.encode() + b"\n\n" + response.content


def assert_leaks_nothing(response, *secrets: str):
    sent = wire_bytes(response)
    for secret in (SECRET, STORED_GRANT, *secrets):
        assert secret.encode() not in sent, f"{secret!r} left in a {response.status_code} response"


STATES = {
    "in progress": {"status": JobStatus.IN_PROGRESS, "phase": "writing"},
    "completed": {
        "status": JobStatus.COMPLETED,
        "phase": "published",
        "result": {
            "promptCount": 1,
            "projectId": "p-1",
            "published": True,
            "verdict": "ship",
            "promptsWritten": [SECRET],
            "accessToken": SECRET,
        },
    },
    "needs reauth": needs_reauth_fields(),
    "held": {
        "status": JobStatus.FAILED,
        "error_code": "PROMPT_GENERATION_HELD",
        "error": {
            "code": "PROMPT_GENERATION_HELD",
            "message": SECRET,
            "retryable": False,
            "needsReauth": False,
            "detail": SECRET,
        },
    },
    "cancelled": {"status": JobStatus.CANCELLED},
}


@pytest.mark.parametrize("state", list(STATES), ids=list(STATES))
def test_a_poll_shows_only_the_allow_listed_fields_and_no_token(tenants, api, caller_token, state):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **STATES[state])
    grant_store(
        job_id=job.id,
        pair=get_pair("semrush"),
        token=PromiseToken(promise_token=STORED_GRANT, token_type="promise_token", expires_in=3600),
    )

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200
    body = json.loads(response.content)
    assert set(body) == DTO_KEYS
    assert body["result"] is None or set(body["result"]) == {"promptCount", "projectId", "published", "verdict"}
    assert body["error"] is None or set(body["error"]) == {"code", "message", "retryable", "needsReauth"}
    assert_leaks_nothing(response, caller_token)


def test_a_winning_reauth_answers_without_the_minted_token(tenants, api, caller_token, ims, queues):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **needs_reauth_fields())

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 202
    assert_leaks_nothing(response, caller_token, grant_load(job.id).token.promise_token)


def test_a_reauth_with_a_forwarded_token_answers_without_it(tenants, api, caller_token, ims, queues):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **needs_reauth_fields())

    forwarded = ims_client.mint(bearer=caller_token, pair=get_pair("semrush"))
    typed = json.dumps(forwarded.as_dict())
    response = api.reauth(tenants.org.id, tenants.brand.id, job.id, **{"x-promise-token": typed})

    assert response.status_code == 202
    assert_leaks_nothing(response, caller_token, forwarded.promise_token)


@pytest.mark.parametrize("case", ["another user", "not awaiting", "no audience", "mint fails", "bad token"])
def test_a_refused_reauth_answers_without_any_token(tenants, bearer, caller_token, ims, queues, case):
    from sandbox.ims import controls

    fields = needs_reauth_fields() if case != "not awaiting" else {"status": JobStatus.COMPLETED}
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **fields)
    grant_store(
        job_id=job.id,
        pair=get_pair("semrush"),
        token=PromiseToken(promise_token=STORED_GRANT, token_type="promise_token", expires_in=3600),
    )
    token = bearer(user_id="someone-else", org_ids=[tenants.org.ims_org_id]) if case == "another user" else caller_token
    headers = {"x-promise-token": '{"promise_token": "' + FORWARDED + '"}'} if case == "bad token" else {}
    if case == "mint fails":
        controls.fail_next_mints(1, 503)

    response = Api(token).reauth(
        tenants.org.id, tenants.brand.id, job.id, audience=None if case == "no audience" else "semrush", **headers
    )

    assert response.status_code in (400, 403, 409, 502)
    assert_leaks_nothing(response, token, caller_token, FORWARDED)
