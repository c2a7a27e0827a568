"""The IMS simulator's wire contract: POST /ims/token/v4 and /ims/invalidate_token/v2, form-encoded."""

import httpx
import jwt
import pytest
from django.conf import settings

from sandbox.ims import controls, keys, ledger
from sandbox.ims.models import PromiseRecord
from serenity.logging import redact


def pair(name="semrush"):
    return settings.IMS_CLIENT_PAIRS[name]


def post(path, data):
    return httpx.post(f"{settings.IMS_HOST}{path}", data=data, timeout=10)


def mint(user_token, name="semrush"):
    p = pair(name)
    return post(
        "/ims/token/v4",
        {
            "grant_type": "promise_token_mint",
            "client_id": p["emitter_client_id"],
            "client_secret": p["emitter_client_secret"],
            "definition_id": p["emitter_definition_id"],
            "user_token": user_token,
        },
    )


def exchange(promise_token, name="semrush", **overrides):
    p = pair(name)
    data = {
        "grant_type": "promise_token_exchange",
        "client_id": p["consumer_client_id"],
        "client_secret": p["consumer_client_secret"],
        "promise_token": promise_token,
    }
    return post("/ims/token/v4", {**data, **overrides})


def invalidate(token, name="semrush", **overrides):
    p = pair(name)
    data = {
        "client_id": p["consumer_client_id"],
        "client_secret": p["consumer_client_secret"],
        "token_type": "promise_token",
        "token": token,
    }
    return post("/ims/invalidate_token/v2", {**data, **overrides})


@pytest.fixture
def promise(sims, bearer):
    return mint(bearer()).json()["promise_token"]


def refusals():
    return [(e["operation"], e["status"], e["reason"]) for e in ledger.events("refused")]


def test_mint_answers_a_typed_jwt_shaped_promise_token(sims, bearer):
    response = mint(bearer(user_id="user-3", org_ids=["A@AdobeOrg"]))

    body = response.json()
    assert response.status_code == 200
    assert body == {"promise_token": body["promise_token"], "token_type": "promise_token", "expires_in": 86400}
    assert redact(body["promise_token"]) == "[REDACTED]"
    assert response.headers["Cache-Control"] == "no-store"
    record = PromiseRecord.objects.get()
    assert (record.digest, record.pair, record.user_id, record.org_ids, record.state) == (
        ledger.digest(body["promise_token"]),
        "semrush",
        "user-3",
        ["A@AdobeOrg"],
        "live",
    )


def test_exchange_answers_an_access_token_and_a_rotated_promise_token(promise):
    response = exchange(promise)

    body = response.json()
    assert response.status_code == 200
    assert body == {
        "access_token": body["access_token"],
        "token_type": "bearer",
        "expires_in": 3600,
        "user_id": "user-1",
        "promise": {
            "promise_token": body["promise"]["promise_token"],
            "token_type": "promise_token",
            "expires_in": 86400,
        },
    }
    assert body["promise"]["promise_token"] != promise
    assert jwt.get_unverified_header(body["access_token"])["kid"] == keys.signing_key()[0]
    assert ledger.live_tokens() == 1


def test_exchange_with_a_wrong_client_secret_is_401_and_keeps_the_token(promise):
    response = exchange(promise, client_secret="guess")

    assert (response.status_code, response.json()) == (401, {"error": "invalid_client"})
    assert refusals() == [("exchange", 401, "bad_client_secret")]
    assert ledger.live_tokens() == 1


def test_exchange_by_an_unknown_client_is_401(promise):
    response = exchange(promise, client_id="stranger")

    assert (response.status_code, response.json()) == (401, {"error": "invalid_client"})
    assert refusals() == [("exchange", 401, "unknown_client")]


def test_exchange_by_the_other_pairs_consumer_is_403(promise):
    response = exchange(promise, name="default")

    assert (response.status_code, response.json()) == (403, {"error": "unauthorized_client"})
    assert refusals() == [("exchange", 403, "wrong_pair")]
    assert ledger.live_tokens() == 1


def test_exchange_of_an_unknown_promise_token_is_401(sims, bearer):
    response = exchange(bearer())

    assert (response.status_code, response.json()) == (401, {"error": "invalid_token"})
    assert refusals() == [("exchange", 401, "unknown_token")]


def test_exchange_of_an_expired_promise_token_is_401(promise):
    controls.expire_live_tokens()

    response = exchange(promise)

    assert (response.status_code, response.json()) == (401, {"error": "invalid_token"})
    assert refusals() == [("exchange", 401, "token_expired")]


def test_only_one_of_two_exchanges_of_the_same_token_succeeds(promise):
    first, second = exchange(promise), exchange(promise)

    assert (first.status_code, second.status_code) == (200, 401)
    assert ledger.count("exchanged") == 1
    assert ledger.count("rotated-to") == 1


def test_a_request_without_a_known_grant_type_is_400(sims):
    response = post("/ims/token/v4", {"grant_type": "password"})

    assert (response.status_code, response.json()) == (400, {"error": "unsupported_grant_type"})


def test_an_exchange_missing_fields_is_400(sims):
    response = post("/ims/token/v4", {"grant_type": "promise_token_exchange", "client_id": "x"})

    assert (response.status_code, response.json()) == (400, {"error": "invalid_request"})
    assert refusals() == [("exchange", 400, "missing_client_secret_promise_token")]


def test_a_json_body_is_not_a_form_and_is_400(sims):
    response = httpx.post(f"{settings.IMS_HOST}/ims/token/v4", json={"grant_type": "promise_token_mint"})

    assert (response.status_code, response.json()) == (400, {"error": "unsupported_grant_type"})


def test_mint_with_a_wrong_definition_is_400(sims, bearer):
    p = pair()
    response = post(
        "/ims/token/v4",
        {
            "grant_type": "promise_token_mint",
            "client_id": p["emitter_client_id"],
            "client_secret": p["emitter_client_secret"],
            "definition_id": "other",
            "user_token": bearer(),
        },
    )

    assert (response.status_code, response.json()) == (400, {"error": "invalid_request"})
    assert refusals() == [("mint", 400, "unknown_definition")]


def test_mint_with_a_foreign_signed_user_token_is_401(sims, bearer):
    response = mint(bearer(key=keys.new_rsa_key()))

    assert (response.status_code, response.json()) == (401, {"error": "invalid_token"})
    assert refusals() == [("mint", 401, "bad_user_token")]
    assert ledger.live_tokens() == 0


def test_a_promise_token_cannot_mint_another(promise):
    response = mint(promise)

    assert (response.status_code, response.json()) == (401, {"error": "invalid_token"})
    assert refusals() == [("mint", 401, "not_a_user_token")]


def test_forced_mint_failures_answer_their_status_then_stop(sims, bearer):
    controls.fail_next_mints(count=1, status=503)

    failed, succeeded = mint(bearer()), mint(bearer())

    assert (failed.status_code, failed.json()) == (503, {"error": "server_error"})
    assert succeeded.status_code == 200
    assert refusals() == [("mint", 503, "forced")]


def test_invalidate_is_idempotent(promise):
    first, second = invalidate(promise), invalidate(promise)

    assert [(r.status_code, r.json()) for r in (first, second)] == [(200, {}), (200, {})]
    assert ledger.count("invalidated") == 1
    assert ledger.live_tokens() == 0


def test_invalidating_an_unknown_token_is_200(sims):
    response = invalidate("never-issued")

    assert (response.status_code, response.json()) == (200, {})
    assert ledger.events() == []


def test_invalidate_by_the_other_pair_is_403_and_keeps_the_token(promise):
    response = invalidate(promise, name="default")

    assert (response.status_code, response.json()) == (403, {"error": "unauthorized_client"})
    assert ledger.live_tokens() == 1


def test_invalidate_with_a_wrong_secret_is_401(promise):
    response = invalidate(promise, client_secret="guess")

    assert (response.status_code, response.json()) == (401, {"error": "invalid_client"})
    assert ledger.live_tokens() == 1


def test_invalidate_of_another_token_type_is_400(promise):
    response = invalidate(promise, token_type="access_token")

    assert (response.status_code, response.json()) == (400, {"error": "unsupported_token_type"})
    assert ledger.live_tokens() == 1
