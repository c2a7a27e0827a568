"""Caller authentication (SPEC §3 "Who may call"): IMS access tokens against the IMS simulator's JWKS, fetched
over HTTP, and SpaceCat session tokens against the configured public key. A token of one kind never verifies as
the other; each hostile token is refused."""

import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings

from sandbox.ims import keys
from sandbox.ims.sessions import issue_session_token
from serenity.auth import IMS, SESSION, Caller, InvalidBearer, verify_bearer


def claims(**overrides):
    now = int(time.time())
    doc = {
        "user_id": "user-1",
        "org_ids": ["ORG1@AdobeOrg"],
        "iss": "ims-sandbox",
        "aud": "serenity-ui",
        "iat": now,
        "exp": now + 600,
    }
    doc.update(overrides)
    return {k: v for k, v in doc.items() if v is not None}


def session_claims(**overrides):
    now = int(time.time())
    doc = {
        "sub": "user-1",
        "email": "user-1",
        "tenants": [{"id": "ORG1"}],
        "iss": settings.SESSION_TOKEN_ISSUER,
        "iat": now,
        "exp": now + 600,
    }
    doc.update(overrides)
    return {k: v for k, v in doc.items() if v is not None}


def rejection(token, **kwargs) -> str:
    with pytest.raises(InvalidBearer) as rejected:
        verify_bearer(token, **kwargs)
    return str(rejected.value)


def public_pem() -> bytes:
    return base64.b64decode(settings.SESSION_TOKEN_PUBLIC_KEY_B64)


# --- IMS access tokens ---------------------------------------------------------------------------------------


def test_a_simulator_user_token_is_accepted(sims, bearer):
    token = bearer(user_id="user-9", org_ids=["A@AdobeOrg", "B@AdobeOrg"])

    caller = verify_bearer(token)

    assert caller == Caller(user_id="user-9", org_ids=frozenset({"A@AdobeOrg", "B@AdobeOrg"}), bearer=token, kind=IMS)
    assert caller.ims_token == token and token not in repr(caller)


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


def test_a_token_without_user_id_is_rejected(sims):
    kid, key = keys.signing_key()
    token = jwt.encode(claims(user_id=None), key, algorithm="RS256", headers={"kid": kid})

    assert rejection(token) == "MissingRequiredClaimError"


@pytest.mark.parametrize("token", ["not-a-jwt", "eyJhbGciOiJSUzI1NiJ9.e30", ""])
def test_a_malformed_token_is_rejected(sims, token):
    assert rejection(token) == "DecodeError"


# --- Session tokens ------------------------------------------------------------------------------------------


def test_a_session_token_is_accepted_with_its_sub_as_user_id_and_its_tenants_as_organizations(db):
    token = issue_session_token(user_id="user-9", org_ids=["A@AdobeOrg", "B"])

    caller = verify_bearer(token)

    assert caller == Caller(
        user_id="user-9", org_ids=frozenset({"A@AdobeOrg", "B@AdobeOrg"}), bearer=token, kind=SESSION
    )
    assert caller.ims_token is None and token not in repr(caller)
    assert caller.can_access_org("A@AdobeOrg") and not caller.can_access_org("C@AdobeOrg")


def test_an_admin_session_token_reaches_every_organization_and_a_read_only_one_reads_them(db):
    admin = verify_bearer(issue_session_token(user_id="u", org_ids=[], is_admin=True))
    reader = verify_bearer(issue_session_token(user_id="u", org_ids=[], is_read_only_admin=True))

    assert admin.can_access_org("ANY@AdobeOrg")
    assert reader.can_access_org("ANY@AdobeOrg", write=False) and not reader.can_access_org("ANY@AdobeOrg")
    assert rejection(issue_session_token(user_id="u", org_ids=[], is_admin=True, is_read_only_admin=True)) == (
        "bad_claims"
    )


def test_a_session_token_is_accepted_within_the_five_second_leeway_and_not_after(db):
    assert verify_bearer(issue_session_token(user_id="u", org_ids=["A"], ttl=-3)).user_id == "u"
    assert rejection(issue_session_token(user_id="u", org_ids=["A"], ttl=-30)) == "ExpiredSignatureError"


def test_a_session_token_without_an_expiry_is_rejected(db):
    token = jwt.encode(
        session_claims(exp=None),
        serialization.load_pem_private_key(settings.SESSION_TOKEN_SANDBOX_PRIVATE_KEY_PEM.encode(), None),
        algorithm="ES256",
    )

    assert rejection(token) == "MissingRequiredClaimError"


def signed_session(doc) -> str:
    key = serialization.load_pem_private_key(settings.SESSION_TOKEN_SANDBOX_PRIVATE_KEY_PEM.encode(), None)
    return jwt.encode(doc, key, algorithm="ES256")


# Each claim's value as a number a token may carry, and shapes of it that are no JSON number.
TIMES = {"exp": 600, "iat": -600, "nbf": -600}


@pytest.mark.parametrize("claim", TIMES)
@pytest.mark.parametrize("shape", ["a string", "a boolean", "an object"])
def test_a_session_tokens_times_must_be_numbers(db, claim, shape):
    """As the original's verifier (jose): a time claim that is no JSON number is refused, even when it reads as a
    valid time."""
    value = int(time.time()) + TIMES[claim]
    as_number = signed_session({**session_claims(), claim: value})
    shaped = {"a string": str(value), "a boolean": True, "an object": {"t": value}}[shape]
    if claim == "exp" and shape == "a boolean":
        shaped = [value]  # True would be an expiry in 1970, refused anyway

    assert verify_bearer(as_number).user_id == "user-1"
    with pytest.raises(InvalidBearer):
        verify_bearer(signed_session({**session_claims(), claim: shaped}))


def test_a_session_token_is_accepted_whatever_its_audience_when_none_is_configured(db, settings):
    """As the original's verifier (jose's jwtVerify without an audience): `aud` is not checked."""
    settings.SESSION_TOKEN_AUDIENCE = ""

    assert verify_bearer(signed_session(session_claims(aud="anything-else"))).user_id == "user-1"
    assert verify_bearer(signed_session(session_claims())).user_id == "user-1"


def test_a_configured_session_token_audience_is_required(db, settings):
    settings.SESSION_TOKEN_AUDIENCE = "spacecat-users"

    assert verify_bearer(signed_session(session_claims(aud="spacecat-users"))).user_id == "user-1"
    assert verify_bearer(signed_session(session_claims(aud=["other", "spacecat-users"]))).user_id == "user-1"
    assert rejection(signed_session(session_claims(aud="anything-else"))) == "InvalidAudienceError"
    assert rejection(signed_session(session_claims())) == "MissingRequiredClaimError"


def test_a_session_token_of_another_issuer_is_rejected(db):
    assert rejection(issue_session_token(user_id="u", org_ids=["A"], issuer="https://elsewhere.example")) == (
        "InvalidIssuerError"
    )


def test_a_session_token_signed_with_a_foreign_key_is_rejected(db):
    foreign = ec.generate_private_key(ec.SECP256R1())

    assert rejection(issue_session_token(user_id="u", org_ids=["A"], key=foreign)) == "InvalidSignatureError"


def test_an_unsigned_token_is_rejected_whatever_it_claims(sims):
    for payload in (claims(), session_claims()):
        assert rejection(jwt.encode(payload, None, algorithm="none")) == "unsupported_alg"


def test_an_hs256_token_keyed_with_the_session_public_key_is_rejected(db):
    # The classic confusion attack: the public key, which anyone may hold, used as an HMAC secret.
    # (PyJWT itself refuses to sign so; the token is put together by hand.)
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")
    payload = base64.urlsafe_b64encode(json.dumps(session_claims()).encode()).rstrip(b"=")
    signature = base64.urlsafe_b64encode(
        hmac.new(public_pem(), header + b"." + payload, hashlib.sha256).digest()
    ).rstrip(b"=")
    forged = (header + b"." + payload + b"." + signature).decode()

    assert rejection(forged) == "unsupported_alg"


def test_an_ims_token_is_never_verified_with_the_session_key_nor_a_session_token_as_an_ims_one(sims, bearer):
    # An ES256 token carrying IMS claims is verified as a session token (and has no `sub`); an RS256 token
    # carrying session claims is verified against the IMS key set (and refused there); in the cookie, where only
    # session tokens are read, an IMS token is refused outright.
    kid, key = keys.signing_key()
    rs256_session = jwt.encode(session_claims(), key, algorithm="RS256", headers={"kid": kid})
    es256_ims = jwt.encode(
        claims(),
        serialization.load_pem_private_key(settings.SESSION_TOKEN_SANDBOX_PRIVATE_KEY_PEM.encode(), None),
        algorithm="ES256",
    )

    assert rejection(rs256_session) == "MissingRequiredClaimError"
    assert rejection(es256_ims)
    assert rejection(bearer(), session_only=True) == "unsupported_alg"


def test_with_session_tokens_turned_off_none_is_accepted(db, settings):
    settings.SESSION_TOKENS_ENABLED = False

    assert rejection(issue_session_token(user_id="u", org_ids=["A"])) == "session_tokens_disabled"


# --- Over HTTP ------------------------------------------------------------------------------------------------


def test_the_session_cookie_authenticates_and_a_bad_one_is_a_401(db, client):
    from tests.markets.factories import OrganizationFactory

    org = OrganizationFactory()
    path = (
        f"/v2/orgs/{org.id}/brands/8c24224f-d559-478d-a546-9b3f04cc3f78/serenity/markets/generation/jobs/"
        "8c24224f-d559-478d-a546-9b3f04cc3f78"
    )
    client.cookies["sessionToken"] = issue_session_token(user_id="u", org_ids=[org.ims_org_id])
    good = client.get(path)
    client.cookies["sessionToken"] = issue_session_token(user_id="u", org_ids=[org.ims_org_id], ttl=-60)
    bad = client.get(path)

    assert good.status_code == 404 and good.json()["code"] == "job_not_found"
    assert bad.status_code == 401 and bad.json()["error"] == "authenticationRequired"


def test_two_session_cookies_are_a_401_whichever_is_good(db, client):
    """A sibling subdomain may set a second `sessionToken` cookie: neither is chosen (never "last wins")."""
    from tests.markets.factories import OrganizationFactory

    org = OrganizationFactory()
    path = (
        f"/v2/orgs/{org.id}/brands/8c24224f-d559-478d-a546-9b3f04cc3f78/serenity/markets/generation/jobs/"
        "8c24224f-d559-478d-a546-9b3f04cc3f78"
    )
    good = issue_session_token(user_id="u", org_ids=[org.ims_org_id])
    other = issue_session_token(user_id="intruder", org_ids=[org.ims_org_id])

    one = client.get(path, HTTP_COOKIE=f"sessionToken={good}")
    two = client.get(path, HTTP_COOKIE=f"sessionToken={other}; theme=dark; sessionToken={good}")
    same_twice = client.get(path, HTTP_COOKIE=f"sessionToken={good}; sessionToken={good}")

    assert one.status_code == 404
    assert (two.status_code, two.json()["error"]) == (401, "authenticationRequired")
    assert same_twice.status_code == 401
