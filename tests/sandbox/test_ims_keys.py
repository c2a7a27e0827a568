"""The IMS simulator's signing key: stored in the database, served as a public-only JWKS."""

import httpx
from cryptography.hazmat.primitives import serialization
from django.conf import settings

from sandbox.ims import keys
from sandbox.ims.models import SigningKey


def get_jwks():
    return httpx.get(settings.IMS_JWKS_URL, timeout=10)


def test_the_jwks_serves_only_the_public_part_of_the_stored_key(sims):
    response = get_jwks()

    stored = SigningKey.objects.get()
    public = serialization.load_pem_private_key(stored.private_pem.encode(), password=None).public_key()
    jwk = keys.public_jwk(public)
    assert response.status_code == 200
    assert response.json() == {
        "keys": [{"kty": "RSA", "n": jwk["n"], "e": "AQAB", "kid": stored.kid, "use": "sig", "alg": "RS256"}]
    }
    assert stored.kid == keys.thumbprint(public)
    assert "BEGIN" not in response.text


def test_the_key_is_created_once_and_reused(sims):
    first, second = get_jwks().json(), get_jwks().json()

    assert first == second
    assert SigningKey.objects.count() == 1


def test_a_key_is_generated_when_none_exists_anywhere(sims, monkeypatch):
    monkeypatch.setattr(keys, "_remembered", None)
    SigningKey.objects.all().delete()

    kid, key = keys.signing_key()

    assert SigningKey.objects.get().kid == kid == keys.thumbprint(key)


def test_tokens_name_the_key_that_signed_them(sims, bearer):
    token = bearer()

    assert keys.verify_token(token, audience="serenity-ui")["user_id"] == "user-1"
    assert get_jwks().json()["keys"][0]["kid"] == keys.signing_key()[0]
