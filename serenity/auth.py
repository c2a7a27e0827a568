"""Caller authentication: an IMS bearer token (RS256 JWT, verified against the IMS JWKS) -> `Caller`.

The caller keeps the raw bearer only to act on the user's behalf (catalogue reads, promise-token
mints); it is excluded from repr so it cannot reach a log line by accident.
"""
import logging
from dataclasses import dataclass, field
from functools import lru_cache

import jwt
from django.conf import settings
from rest_framework import authentication, exceptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caller:
    user_id: str
    org_ids: frozenset[str]
    bearer: str = field(repr=False)
    # DRF's IsAuthenticated reads this.
    is_authenticated: bool = True

    def can_access_org(self, ims_org_id: str) -> bool:
        return ims_org_id in self.org_ids


@lru_cache(maxsize=4)
def _jwks_client(url: str) -> jwt.PyJWKClient:
    # PyJWKClient caches the key set and refetches it when a token names an unknown kid (a key rotation),
    # at most once per cooldown: a flood of bearers with made-up kids cannot turn into a flood of fetches.
    return jwt.PyJWKClient(url, cache_keys=True, lifespan=settings.IMS_JWKS_CACHE_SECONDS, timeout=5,
                           cooldown_duration=settings.IMS_JWKS_REFETCH_MIN_SECONDS)


class InvalidBearer(Exception):
    """The bearer is not a valid IMS access token for this service (the reason is for logs only)."""


def verify_bearer(token: str) -> Caller:
    """Verify an IMS access token and return the caller. Raises InvalidBearer."""
    try:
        signing_key = _jwks_client(settings.IMS_JWKS_URL).get_signing_key_from_jwt(token)
        claims = jwt.decode(
            token,
            signing_key.key,
            algorithms=["RS256"],
            audience=settings.IMS_AUDIENCE,
            issuer=settings.IMS_ISSUER,
            options={"require": ["exp", "iss", "aud", "user_id"]},
            leeway=30,
        )
    except jwt.PyJWKClientConnectionError as exc:
        log.warning("IMS key set unreachable", extra={"reason": type(exc).__name__})
        raise InvalidBearer("jwks_unreachable") from exc
    except (jwt.PyJWTError, ValueError) as exc:
        raise InvalidBearer(type(exc).__name__) from exc
    user_id = claims.get("user_id")
    orgs = claims.get("org_ids") or []
    if not isinstance(user_id, str) or not user_id or not isinstance(orgs, list):
        raise InvalidBearer("bad_claims")
    return Caller(user_id=user_id, org_ids=frozenset(o for o in orgs if isinstance(o, str)), bearer=token)


class ImsBearerAuthentication(authentication.BaseAuthentication):
    """DRF authentication: `Authorization: Bearer <IMS access token>`. Missing or invalid -> 401."""

    www_authenticate_realm = "serenity"

    def authenticate(self, request):
        header = request.headers.get("Authorization", "")
        if not header:
            return None  # -> NotAuthenticated (401) from the permission check
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise exceptions.AuthenticationFailed("Expected `Authorization: Bearer <token>`.")
        try:
            caller = verify_bearer(token.strip())
        except InvalidBearer as exc:
            log.info("bearer rejected", extra={"reason": str(exc)})
            raise exceptions.AuthenticationFailed("The bearer token is invalid or expired.") from None
        return caller, None

    def authenticate_header(self, request):
        return f'Bearer realm="{self.www_authenticate_realm}"'
