"""The IMS simulator's signing key and the JWTs it issues: user bearers, access and promise tokens.

The RSA key is generated on first need and stored in the database, so every process (API, workers,
management commands) signs and verifies with the same key and serves the same JWKS.
"""

import base64
import hashlib
import json
import threading
import time
import uuid

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from django.db import transaction

from sandbox.ims.models import SigningKey

ALGORITHM = "RS256"
KEY_NAME = "signing"

# Values of the `type` claim, as IMS sets them.
USER_TOKEN = "access_token"
ACCESS_TOKEN = "access_token"
PROMISE_TOKEN = "promise_token"

_lock = threading.Lock()
_parsed: dict[str, rsa.RSAPrivateKey] = {}
# The last key this process used. When the table is emptied under a running process (a test database
# flush), the same key is stored again rather than a new one: verifiers that cached the JWKS keep working
# (PyJWT refetches a key set for an unknown kid at most once per 30 s).
_remembered: tuple[str, str] | None = None


def new_rsa_key() -> rsa.RSAPrivateKey:
    """A fresh 2048-bit RSA key (also what a test uses as a foreign key)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: rsa.RSAPrivateKey | rsa.RSAPublicKey) -> dict:
    """The public JWK of `key` with its `kid`, `use` and `alg`."""
    public = key.public_key() if isinstance(key, rsa.RSAPrivateKey) else key
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(public, as_dict=True)
    jwk = {"kty": "RSA", "n": jwk["n"], "e": jwk["e"]}
    return {**jwk, "kid": thumbprint(public), "use": "sig", "alg": ALGORITHM}


def thumbprint(key: rsa.RSAPrivateKey | rsa.RSAPublicKey) -> str:
    """RFC 7638 JWK thumbprint (SHA-256, base64url without padding) of the key's public part."""
    public = key.public_key() if isinstance(key, rsa.RSAPrivateKey) else key
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(public, as_dict=True)
    canonical = json.dumps({"e": jwk["e"], "kty": "RSA", "n": jwk["n"]}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _parse(kid: str, pem: str) -> rsa.RSAPrivateKey:
    key = _parsed.get(kid)
    if key is None:
        loaded = serialization.load_pem_private_key(pem.encode(), password=None)
        if not isinstance(loaded, rsa.RSAPrivateKey):
            raise ValueError(f"signing key {kid} is not an RSA key")
        _parsed[kid] = key = loaded
    return key


def signing_key() -> tuple[str, rsa.RSAPrivateKey]:
    """The simulator's `(kid, private key)`, creating and storing the key when there is none yet.

    Concurrent first calls in several processes agree on one key: the row name is unique and the loser
    of the insert reads the winner's key.
    """
    global _remembered
    row = SigningKey.objects.filter(name=KEY_NAME).first()
    if row is None:
        with _lock:
            if _remembered is not None:
                kid, pem = _remembered
            else:
                key = new_rsa_key()
                kid, pem = thumbprint(key), _pem(key)
            with transaction.atomic():
                row, _ = SigningKey.objects.get_or_create(name=KEY_NAME, defaults={"kid": kid, "private_pem": pem})
    _remembered = (row.kid, row.private_pem)
    return row.kid, _parse(row.kid, row.private_pem)


def jwks() -> dict:
    """The JWKS document: public parts only."""
    _, key = signing_key()
    return {"keys": [public_jwk(key)]}


def _sign(claims: dict, key: rsa.RSAPrivateKey | None) -> str:
    if key is None:
        kid, key = signing_key()
    else:
        kid = thumbprint(key)
    return jwt.encode(claims, key, algorithm=ALGORITHM, headers={"kid": kid, "typ": "JWT"})


def issue_user_token(
    *,
    user_id: str,
    org_ids: list[str],
    ttl: int = 3600,
    issuer: str | None = None,
    audience: str | None = None,
    key=None,
) -> str:
    """An RS256 user bearer like IMS issues for the UI: claims user_id, org_ids, iss, aud, iat, exp.

    Defaults: issuer settings.IMS_ISSUER, audience the first of settings.IMS_AUDIENCE, the simulator's key.
    A negative `ttl` gives an already expired token; `key` signs with another RSA key (its own kid).
    """
    now = int(time.time())
    claims = {
        "type": USER_TOKEN,
        "jti": uuid.uuid4().hex,
        "user_id": user_id,
        "org_ids": list(org_ids),
        "iss": issuer if issuer is not None else settings.IMS_ISSUER,
        "aud": audience if audience is not None else settings.IMS_AUDIENCE[0],
        "iat": now,
        "exp": now + ttl,
    }
    return _sign(claims, key)


def issue_access_token(
    *, user_id: str, org_ids: list[str], client_id: str, scope: str, ttl: int = 3600, key=None
) -> str:
    """An RS256 access token as a promise-token exchange returns it; its audience is `client_id`."""
    now = int(time.time())
    claims = {
        "type": ACCESS_TOKEN,
        "jti": uuid.uuid4().hex,
        "user_id": user_id,
        "org_ids": list(org_ids),
        "client_id": client_id,
        "scope": scope,
        "iss": settings.IMS_ISSUER,
        "aud": client_id,
        "iat": now,
        "exp": now + ttl,
    }
    return _sign(claims, key)


def issue_promise_token(*, user_id: str, client_id: str, ttl: int) -> str:
    """A JWT-shaped promise token. Its state lives in PromiseRecord; the value is never stored."""
    now = int(time.time())
    claims = {
        "type": PROMISE_TOKEN,
        "jti": uuid.uuid4().hex,
        "user_id": user_id,
        "client_id": client_id,
        "iss": settings.IMS_ISSUER,
        "iat": now,
        "exp": now + ttl,
    }
    return _sign(claims, None)


def verify_token(token: str, *, audience: str | list[str] | None = None) -> dict:
    """Verify a token the simulator signed (signature, issuer, expiry; audience when given); return its claims.

    Reads the key from the database, so a simulator in any process can check a bearer without HTTP.
    Raises jwt.PyJWTError.
    """
    _, key = signing_key()
    return jwt.decode(
        token,
        key.public_key(),
        algorithms=[ALGORITHM],
        issuer=settings.IMS_ISSUER,
        audience=audience,
        options={"require": ["exp", "iss"], "verify_aud": audience is not None},
    )
