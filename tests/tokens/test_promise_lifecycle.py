"""A promise token's life through the product's IMS client and token services, against the IMS simulator."""

import logging
import socket
import uuid

import pytest

from sandbox.ims import controls, keys, ledger
from serenity.clients.http import ReauthRequired, TransientError
from tokens import services
from tokens.clients import ims
from tokens.exceptions import NeedsReauth
from tokens.fingerprints import token_fingerprint
from tokens.models import PromiseGrant
from tokens.pairs import get_pair
from tokens.types import PromiseToken

JOB_ID = "8f2b0c52-7d5e-4c1a-9a43-5d1f1e2a3b4c"


def ledger_events(**filters):
    return [{k: v for k, v in e.items() if k != "at"} for e in ledger.events(**filters)]


def event(kind, operation, token, *, replaces=None, pair="semrush", user_id="user-1", status=None, reason=""):
    return {
        "kind": kind,
        "operation": operation,
        "fingerprint": ledger.fingerprint(token.promise_token) if token else "",
        "replaces": ledger.fingerprint(replaces.promise_token) if replaces else "",
        "pair": pair,
        "user_id": user_id,
        "status": status,
        "reason": reason,
    }


@pytest.fixture
def semrush():
    return get_pair("semrush")


@pytest.fixture
def unused_port() -> int:
    """A local port nothing listens on: a connection to it is refused before any byte is sent."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_promise_token_is_minted_exchanged_rotated_and_invalidated(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(user_id="user-1"), pair=semrush)
    assert (minted.token_type, minted.expires_in) == ("promise_token", 86400)
    assert ledger_events() == [event("minted", "mint", minted)]

    exchanged = services.promise_exchange(pair=semrush, token=minted)
    rotated = exchanged.rotated
    assert rotated.promise_token != minted.promise_token
    assert exchanged.user_id == "user-1"
    assert ledger_events()[1:] == [
        event("exchanged", "exchange", minted),
        event("rotated_to", "exchange", rotated, replaces=minted),
    ]

    with pytest.raises(NeedsReauth) as refused:
        ims.exchange(promise=minted, pair=semrush)
    assert refused.value.status == 401
    assert ledger_events()[3:] == [event("refused", "exchange", minted, status=401, reason="token_exchanged")]

    rotated_again = ims.exchange(promise=rotated, pair=semrush).rotated
    assert ledger_events()[4:] == [
        event("exchanged", "exchange", rotated),
        event("rotated_to", "exchange", rotated_again, replaces=rotated),
    ]

    ims.invalidate(promise=rotated_again, pair=semrush)
    assert ledger_events()[6:] == [event("invalidated", "invalidate", rotated_again)]

    with pytest.raises(NeedsReauth) as refused:
        ims.exchange(promise=rotated_again, pair=semrush)
    assert refused.value.status == 401
    assert ledger_events()[7:] == [event("refused", "exchange", rotated_again, status=401, reason="token_invalidated")]
    assert ledger.live_tokens() == 0


def test_the_access_token_is_signed_by_the_simulator_and_names_user_orgs_client_and_scope(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(user_id="user-7", org_ids=["A@AdobeOrg", "B@AdobeOrg"]), pair=semrush)

    access = ims.exchange(promise=minted, pair=semrush).access

    claims = keys.verify_token(access.access_token, audience=semrush.consumer_client_id)
    assert access.expires_in == 3600
    assert {k: v for k, v in claims.items() if k not in ("iat", "exp", "jti")} == {
        "type": "access_token",
        "user_id": "user-7",
        "org_ids": ["A@AdobeOrg", "B@AdobeOrg"],
        "client_id": semrush.consumer_client_id,
        "scope": "openid,AdobeID,semrush.read,semrush.write",
        "iss": "ims-sandbox",
        "aud": semrush.consumer_client_id,
    }
    assert claims["exp"] - claims["iat"] == 3600


def test_a_forced_exchange_failure_makes_the_client_raise_needs_reauth(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    controls.fail_next_exchanges(count=1, status=401)

    with pytest.raises(NeedsReauth) as refused:
        ims.exchange(promise=minted, pair=semrush)

    assert refused.value.status == 401
    assert ledger_events(kind="refused") == [event("refused", "exchange", minted, status=401, reason="forced")]
    assert controls.state() == {}
    assert ledger.live_tokens() == 1


def test_a_forced_403_exchange_also_needs_reauth(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    controls.fail_next_exchanges(count=1, status=403)

    with pytest.raises(NeedsReauth) as refused:
        ims.exchange(promise=minted, pair=semrush)

    assert refused.value.status == 403
    assert ledger.count("refused") == 1


def test_an_exchange_answered_with_a_5xx_is_not_retried_in_place(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    controls.fail_next_exchanges(count=1, status=503)

    with pytest.raises(TransientError) as failed:
        ims.exchange(promise=minted, pair=semrush)

    # IMS may have rotated the token before answering 503: a second attempt could present a dead token.
    assert (failed.value.status, failed.value.maybe_processed) == (503, True)
    assert ledger_events()[1:] == [event("refused", "exchange", minted, status=503, reason="forced")]


def test_an_exchange_whose_answer_is_lost_after_the_rotation_is_attempted_once(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    controls.lose_next_exchange_answers(count=1, status=500)

    with pytest.raises(TransientError) as failed:
        ims.exchange(promise=minted, pair=semrush)

    assert failed.value.maybe_processed is True
    assert [e["kind"] for e in ledger_events()] == ["minted", "exchanged", "rotated_to", "answer_lost"]
    with pytest.raises(NeedsReauth):  # the token we still hold was rotated away
        ims.exchange(promise=minted, pair=semrush)


def test_an_exchange_stalled_past_the_client_timeout_is_attempted_once(sims, bearer, semrush, settings):
    settings.IMS_TIMEOUT_SECONDS = 0.5
    minted = ims.mint(bearer=bearer(), pair=semrush)
    controls.lose_next_exchange_answers(count=1, stall_seconds=1.5)

    with pytest.raises(TransientError) as failed:
        ims.exchange(promise=minted, pair=semrush)

    assert failed.value.maybe_processed is True and "ReadTimeout" in str(failed.value)
    assert ledger.count("exchanged") == 1


def test_a_connection_that_never_opened_is_retried_and_says_nothing_reached_ims(settings, semrush, unused_port, caplog):
    caplog.set_level(logging.INFO, logger="serenity.clients.http")
    settings.IMS_HOST = f"http://127.0.0.1:{unused_port}"
    token = PromiseToken(promise_token="never-sent", token_type="promise_token", expires_in=60)

    with pytest.raises(TransientError) as failed:
        ims.exchange(promise=token, pair=semrush)

    assert failed.value.maybe_processed is False
    assert "ConnectError" in str(failed.value)
    assert [r.attempt for r in caplog.records if r.getMessage() == "retrying after transient error"] == [1, 2]


def test_exchanging_with_the_other_pairs_consumer_needs_reauth(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=get_pair("default"))

    with pytest.raises(NeedsReauth) as refused:
        ims.exchange(promise=minted, pair=semrush)

    assert refused.value.status == 403
    assert ledger_events(kind="refused") == [event("refused", "exchange", minted, status=403, reason="wrong_pair")]
    assert ledger.live_tokens() == 1


def test_an_expired_promise_token_needs_reauth(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    assert controls.expire_live_tokens() == 1

    with pytest.raises(NeedsReauth):
        ims.exchange(promise=minted, pair=semrush)

    assert ledger_events(kind="refused") == [event("refused", "exchange", minted, status=401, reason="token_expired")]


def test_a_mint_answered_with_a_5xx_is_not_retried_in_place(sims, bearer, semrush):
    controls.fail_next_mints(count=2, status=503)

    with pytest.raises(TransientError) as failed:
        ims.mint(bearer=bearer(), pair=semrush)

    assert failed.value.status == 503
    assert ledger_events() == [event("refused", "mint", None, user_id="", status=503, reason="forced")]
    assert ledger.live_tokens() == 0


def test_a_mint_refused_with_429_is_retried(sims, bearer, semrush):
    controls.fail_next_mints(count=1, status=429)

    minted = ims.mint(bearer=bearer(), pair=semrush)

    assert [e["kind"] for e in ledger_events()] == ["refused", "minted"]
    assert ledger_events()[1] == event("minted", "mint", minted)


def test_a_mint_whose_answer_is_lost_is_counted_and_nothing_is_stored(sims, bearer, semrush, metric_lines):
    controls.lose_next_mint_answers(count=1, status=502)

    with pytest.raises(TransientError):
        services.promise_mint(bearer=bearer(), pair=semrush)

    assert [e["kind"] for e in ledger_events()] == ["minted", "answer_lost"]
    assert [line["PromiseMintAnswerLost"] for line in metric_lines if "PromiseMintAnswerLost" in line] == [1]
    assert not PromiseGrant.objects.exists()


def test_an_expired_bearer_cannot_mint(sims, bearer, semrush):
    with pytest.raises(ReauthRequired) as refused:
        ims.mint(bearer=bearer(ttl=-120), pair=semrush)

    assert refused.value.status == 401
    assert ledger_events() == [event("refused", "mint", None, user_id="", status=401, reason="bad_user_token")]


def test_ending_a_grant_invalidates_its_token_at_ims_and_deletes_it(sims, bearer, semrush):
    minted = services.promise_mint(bearer=bearer(), pair=semrush)
    services.grant_store(job_id=JOB_ID, pair=semrush, token=minted)

    taken = services.grant_take(JOB_ID)
    taken.invalidate()

    assert not PromiseGrant.objects.filter(job_id=JOB_ID).exists()
    assert ledger_events(kind="invalidated") == [event("invalidated", "invalidate", minted)]
    assert ledger.live_tokens() == 0


def test_the_grant_keeps_the_rotated_token_after_an_exchange(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    services.grant_store(job_id=JOB_ID, pair=semrush, token=minted)

    loaded = services.grant_load(JOB_ID)
    rotated = services.promise_exchange(pair=semrush, token=loaded.token).rotated
    assert services.grant_rotate(job_id=JOB_ID, expect_fingerprint=loaded.fingerprint, token=rotated) is True

    stored = services.grant_load(JOB_ID)
    assert (stored.pair, stored.token) == (semrush, rotated)
    assert stored.fingerprint == token_fingerprint(rotated.promise_token) != loaded.fingerprint
    assert ledger.live_tokens() == 1


def test_a_rotation_is_stored_only_over_the_token_that_was_exchanged(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    services.grant_store(job_id=JOB_ID, pair=semrush, token=minted)
    other = PromiseToken(promise_token="another", token_type="promise_token", expires_in=60)

    assert services.grant_rotate(job_id=JOB_ID, expect_fingerprint=token_fingerprint("stale"), token=other) is False
    assert services.grant_load(JOB_ID).token == minted


def test_two_grants_can_never_hold_the_same_token(db, semrush):
    token = PromiseToken(promise_token="one-owner-only", token_type="promise_token", expires_in=60)
    services.grant_store(job_id=JOB_ID, pair=semrush, token=token)

    with pytest.raises(services.TokenAlreadyGranted):
        services.grant_store(job_id="0b7e6a1c-2f3d-4e5a-8b9c-0d1e2f3a4b5c", pair=semrush, token=token)

    assert list(PromiseGrant.objects.values_list("job_id", flat=True)) == [uuid.UUID(JOB_ID)]
