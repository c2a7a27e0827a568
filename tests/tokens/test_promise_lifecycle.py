"""A promise token's life through the product's IMS client and token services, against the IMS simulator."""
import pytest

from serenity.clients.http import ReauthRequired, TransientError
from serenity.sandbox.ims import controls, keys, ledger
from tokens import services
from tokens.clients import ims
from tokens.exceptions import NeedsReauth
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


def test_a_promise_token_is_minted_exchanged_rotated_and_invalidated(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(user_id="user-1"), pair=semrush)
    assert (minted.token_type, minted.expires_in) == ("promise_token", 86400)
    assert ledger_events() == [event("minted", "mint", minted)]

    _, rotated = services.promise_exchange(pair=semrush, token=minted)
    assert rotated.promise_token != minted.promise_token
    assert ledger_events()[1:] == [
        event("exchanged", "exchange", minted),
        event("rotated_to", "exchange", rotated, replaces=minted),
    ]

    with pytest.raises(NeedsReauth) as refused:
        ims.exchange(promise=minted, pair=semrush)
    assert refused.value.status == 401
    assert ledger_events()[3:] == [event("refused", "exchange", minted, status=401, reason="token_exchanged")]

    _, rotated_again = ims.exchange(promise=rotated, pair=semrush)
    assert ledger_events()[4:] == [
        event("exchanged", "exchange", rotated),
        event("rotated_to", "exchange", rotated_again, replaces=rotated),
    ]

    ims.invalidate(promise=rotated_again, pair=semrush)
    assert ledger_events()[6:] == [event("invalidated", "invalidate", rotated_again)]

    with pytest.raises(NeedsReauth) as refused:
        ims.exchange(promise=rotated_again, pair=semrush)
    assert refused.value.status == 401
    assert ledger_events()[7:] == [
        event("refused", "exchange", rotated_again, status=401, reason="token_invalidated")
    ]
    assert ledger.live_tokens() == 0


def test_the_access_token_is_signed_by_the_simulator_and_names_user_orgs_client_and_scope(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(user_id="user-7", org_ids=["A@AdobeOrg", "B@AdobeOrg"]), pair=semrush)

    access, _ = ims.exchange(promise=minted, pair=semrush)

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


def test_a_single_transient_exchange_failure_is_retried_by_the_client(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    controls.fail_next_exchanges(count=1, status=503)

    _, rotated = ims.exchange(promise=minted, pair=semrush)

    assert ledger_events()[1:] == [
        event("refused", "exchange", minted, status=503, reason="forced"),
        event("exchanged", "exchange", minted),
        event("rotated_to", "exchange", rotated, replaces=minted),
    ]


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


def test_two_forced_mint_failures_outlast_the_clients_single_retry(sims, bearer, semrush):
    controls.fail_next_mints(count=2, status=503)

    with pytest.raises(TransientError) as failed:
        ims.mint(bearer=bearer(), pair=semrush)

    assert failed.value.status == 503
    assert ledger_events() == [
        event("refused", "mint", None, user_id="", status=503, reason="forced"),
        event("refused", "mint", None, user_id="", status=503, reason="forced"),
    ]
    assert ledger.live_tokens() == 0


def test_an_expired_bearer_cannot_mint(sims, bearer, semrush):
    with pytest.raises(ReauthRequired) as refused:
        ims.mint(bearer=bearer(ttl=-120), pair=semrush)

    assert refused.value.status == 401
    assert ledger_events() == [
        event("refused", "mint", None, user_id="", status=401, reason="bad_user_token")
    ]


def test_ending_a_grant_invalidates_its_token_at_ims_and_deletes_it(sims, bearer, semrush):
    minted = services.promise_obtain(bearer=bearer(), pair=semrush, forwarded=None)
    services.grant_store(job_id=JOB_ID, pair=semrush, token=minted)

    services.grant_end(JOB_ID)

    assert not PromiseGrant.objects.filter(job_id=JOB_ID).exists()
    assert ledger_events(kind="invalidated") == [event("invalidated", "invalidate", minted)]
    assert ledger.live_tokens() == 0


def test_the_grant_keeps_the_rotated_token_after_an_exchange(sims, bearer, semrush):
    minted = ims.mint(bearer=bearer(), pair=semrush)
    services.grant_store(job_id=JOB_ID, pair=semrush, token=minted)

    _, rotated = services.promise_exchange(pair=semrush, token=services.grant_load(JOB_ID)[1])
    assert services.grant_rotate(job_id=JOB_ID, token=rotated) == 1

    pair, stored = services.grant_load(JOB_ID)
    assert (pair, stored) == (semrush, rotated)
    assert isinstance(stored, PromiseToken)
    assert ledger.live_tokens() == 1
