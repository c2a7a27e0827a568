"""Caller authentication: `verify_bearer` against the IMS simulator's JWKS, fetched over HTTP."""
import time

import jwt
import pytest

from serenity.auth import Caller, InvalidBearer, verify_bearer
from serenity.sandbox.ims import keys


def claims(**overrides):
    now = int(time.time())
    doc = {"user_id": "user-1", "org_ids": ["ORG1@AdobeOrg"], "iss": "ims-sandbox", "aud": "serenity-ui",
           "iat": now, "exp": now + 600}
    doc.update(overrides)
    return {k: v for k, v in doc.items() if v is not None}


def rejection(token) -> str:
    with pytest.raises(InvalidBearer) as rejected:
        verify_bearer(token)
    return str(rejected.value)


def test_a_simulator_user_token_is_accepted(sims, bearer):
    token = bearer(user_id="user-9", org_ids=["A@AdobeOrg", "B@AdobeOrg"])

    caller = verify_bearer(token)

    assert caller == Caller(user_id="user-9", org_ids=frozenset({"A@AdobeOrg", "B@AdobeOrg"}), bearer=token)
    assert token not in repr(caller)


def test_an_expired_token_is_rejected(sims, bearer):
    assert rejection(bearer(ttl=-120)) == "ExpiredSignatureError"


def test_a_token_from_another_issuer_is_rejected(sims, bearer):
    assert rejection(bearer(issuer="https://elsewhere.example")) == "InvalidIssuerError"


def test_a_token_for_another_audience_is_rejected(sims, bearer):
    assert rejection(bearer(audience="some-other-client")) == "InvalidAudienceError"


def test_a_token_signed_with_a_foreign_key_is_rejected(sims, bearer):
    assert rejection(bearer(key=keys.new_rsa_key())) == "PyJWKClientError"


def test_a_foreign_signature_under_the_simulators_kid_is_rejected(sims):
    kid, _ = keys.signing_key()
    forged = jwt.encode(claims(), keys.new_rsa_key(), algorithm="RS256", headers={"kid": kid})

    assert rejection(forged) == "InvalidSignatureError"


def test_an_unsigned_token_is_rejected(sims):
    kid, _ = keys.signing_key()
    unsigned = jwt.encode(claims(), None, algorithm="none", headers={"kid": kid})

    assert rejection(unsigned) == "InvalidAlgorithmError"


def test_a_token_without_user_id_is_rejected(sims):
    kid, key = keys.signing_key()
    token = jwt.encode(claims(user_id=None), key, algorithm="RS256", headers={"kid": kid})

    assert rejection(token) == "MissingRequiredClaimError"


@pytest.mark.parametrize("token", ["not-a-jwt", "eyJhbGciOiJSUzI1NiJ9.e30", ""])
def test_a_malformed_token_is_rejected(sims, token):
    assert rejection(token) == "DecodeError"
