"""Promise tokens at rest: encrypted with MultiFernet, readable across a key rotation, refused under a stranger's key."""

import pytest
from cryptography.fernet import Fernet

from tokens import crypto, services
from tokens.models import PromiseGrant
from tokens.pairs import get_pair
from tokens.types import PromiseToken

JOB_ID = "5a4f3e2d-1c0b-4a98-8765-43210fedcba9"
TOKEN = PromiseToken(
    promise_token="eyJhbGciOiJSUzI1NiJ9.eyJqdGkiOiJhYmMifQ.c2lnbmF0dXJlLXZhbHVl",
    token_type="promise_token",
    expires_in=86400,
)


@pytest.fixture
def old_key(settings):
    key = Fernet.generate_key().decode()
    settings.PROMISE_TOKEN_KEYS = [key]
    return key


@pytest.mark.django_db
def test_the_stored_grant_does_not_contain_the_token(old_key):
    services.grant_store(job_id=JOB_ID, pair=get_pair("semrush"), token=TOKEN)

    grant = PromiseGrant.objects.get(job_id=JOB_ID)
    assert TOKEN.promise_token not in grant.ciphertext
    assert "eyJ" not in grant.ciphertext
    assert crypto.unseal(grant.ciphertext) == TOKEN


def test_a_token_sealed_under_the_old_key_opens_after_a_new_key_is_put_first(settings, old_key):
    sealed = crypto.seal(TOKEN)
    settings.PROMISE_TOKEN_KEYS = [Fernet.generate_key().decode(), old_key]

    assert crypto.unseal(sealed) == TOKEN


def test_rotate_re_encrypts_under_the_new_key(settings, old_key):
    sealed = crypto.seal(TOKEN)
    new_key = Fernet.generate_key().decode()
    settings.PROMISE_TOKEN_KEYS = [new_key, old_key]

    rotated = crypto.rotate(sealed)

    assert Fernet(new_key.encode()).decrypt(rotated.encode()) == Fernet(old_key.encode()).decrypt(sealed.encode())
    settings.PROMISE_TOKEN_KEYS = [new_key]
    assert crypto.unseal(rotated) == TOKEN


def test_a_token_sealed_under_an_unknown_key_is_refused(settings, old_key):
    sealed = crypto.seal(TOKEN)
    settings.PROMISE_TOKEN_KEYS = [Fernet.generate_key().decode()]

    with pytest.raises(crypto.InvalidToken):
        crypto.unseal(sealed)
