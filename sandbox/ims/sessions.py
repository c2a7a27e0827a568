"""SpaceCat session tokens, as the original service's sign-in issues them from an IMS user token (local runs).

The original's UI signs in once (`POST /auth/login {accessToken}` -> `{sessionToken}`) and then calls with the
session token: an ES256 JWT of issuer SESSION_TOKEN_ISSUER whose `sub` (and `email`) is the IMS user id and
whose `tenants[].id` are the IMS org idents (without `@AdobeOrg`). Signed with the local key pair minted into
var/local-secrets.json, whose public half the API verifies with.
"""

import time
import uuid

import jwt
from cryptography.hazmat.primitives import serialization
from django.conf import settings

ORG_SUFFIX = "@AdobeOrg"


def signing_key():
    """The local sign-in key (never present outside local runs)."""
    pem = settings.SESSION_TOKEN_SANDBOX_PRIVATE_KEY_PEM
    if not pem:
        raise RuntimeError("no local session-token signing key (local runs only)")
    return serialization.load_pem_private_key(pem.encode(), password=None)


def issue_session_token(
    *,
    user_id: str,
    org_ids: list[str],
    ttl: int = 24 * 3600,
    is_admin: bool = False,
    issuer: str | None = None,
    key=None,
    **claims,
) -> str:
    """A session token for `user_id` reaching `org_ids` (IMS org ids, with or without `@AdobeOrg`). A negative
    `ttl` gives an expired one; `key` signs with another ES256 key; `claims` adds or overrides claims."""
    now = int(time.time())
    payload = {
        "iss": issuer if issuer is not None else settings.SESSION_TOKEN_ISSUER,
        "sub": user_id,
        "email": user_id,
        "aud": "spacecat-users",
        "jti": uuid.uuid4().hex,
        "tenants": [{"id": org.removesuffix(ORG_SUFFIX), "subServices": [], "entitlement": {}} for org in org_ids],
        "is_admin": is_admin,
        "iat": now,
        "exp": now + ttl,
        **claims,
    }
    return jwt.encode(payload, key or signing_key(), algorithm="ES256", headers={"typ": "JWT"})
