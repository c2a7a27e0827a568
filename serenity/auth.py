"""Caller authentication: two kinds of bearer (SPEC §3 "Who may call") -> `Caller`.

- An **IMS user access token**: RS256, verified against the IMS JWKS, issuer and audience checked; the
  caller's user id is its `user_id` claim (never `sub` or email), its organizations its `org_ids`.
- A **SpaceCat session token**, as the original service's UI sends after its login: ES256, verified with the
  public key configured as base64 SPKI PEM (SESSION_TOKEN_PUBLIC_KEY_B64), the configured issuer, 5 s
  leeway, expiry required, `exp`/`iat`/`nbf` JSON numbers, `aud` checked against SESSION_TOKEN_AUDIENCE
  (which a deployment must set; the original's verifier checks none). Its user id is `sub` (the IMS user id
  the original's login puts there); its organizations `tenants[].id` (IMS org idents, `@AdobeOrg` added when
  absent); `is_admin` reaches every organization and `is_read_only_admin` may read every one. Sent as a bearer
  or in the `sessionToken` cookie (two such cookies: refused).

The kind is chosen by the token's own `alg` header, and each kind is then verified with its algorithm and key
pinned, so a token of one kind never verifies as the other: `alg: none`, an HS256 token keyed with a public
key, a foreign key, a wrong issuer or an expired token are all refused. The caller keeps the raw bearer only
to act on the user's behalf (an IMS access token is forwarded to Semrush and minted from); it is excluded from
repr so it cannot reach a log line by accident, and a session token is never sent anywhere.
"""

import base64
import logging
from dataclasses import dataclass, field
from functools import lru_cache

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.conf import settings
from rest_framework import authentication, exceptions

log = logging.getLogger(__name__)

IMS = "ims"
SESSION = "session"
SESSION_COOKIE = "sessionToken"
SESSION_LEEWAY_SECONDS = 5
IMS_LEEWAY_SECONDS = 30
ORG_SUFFIX = "@AdobeOrg"


@dataclass(frozen=True)
class Caller:
    user_id: str
    org_ids: frozenset[str]
    bearer: str = field(repr=False)
    kind: str = IMS
    is_admin: bool = False
    is_read_only_admin: bool = False
    # DRF's IsAuthenticated reads this.
    is_authenticated: bool = True

    @property
    def ims_token(self) -> str | None:
        """The caller's IMS user access token, which Semrush and IMS accept; None for a session caller (a
        session token is this service's and the original's alone)."""
        return self.bearer if self.kind == IMS else None

    def can_access_org(self, ims_org_id: str, *, write: bool = True) -> bool:
        """Whether the caller may act on (`write`) or read an organization."""
        return self.is_admin or (self.is_read_only_admin and not write) or ims_org_id in self.org_ids

    @property
    def reads_every_org(self) -> bool:
        return self.is_admin or self.is_read_only_admin


class InvalidBearer(Exception):
    """The bearer is not a valid token of either kind (the reason is for logs only)."""


@lru_cache(maxsize=4)
def _jwks_client(url: str) -> jwt.PyJWKClient:
    # PyJWKClient caches the key set and refetches it when a token names an unknown kid (a key rotation),
    # at most once per cooldown: a flood of bearers with made-up kids cannot turn into a flood of fetches.
    return jwt.PyJWKClient(
        url,
        cache_keys=True,
        lifespan=settings.IMS_JWKS_CACHE_SECONDS,
        timeout=5,
        cooldown_duration=settings.IMS_JWKS_REFETCH_MIN_SECONDS,
    )


@lru_cache(maxsize=4)
def session_public_key(b64_pem: str) -> ec.EllipticCurvePublicKey:
    """The session tokens' public key from its configured form (base64 of an SPKI PEM, as the original's
    AUTH_PUBLIC_KEY_B64). Raises ValueError for anything but a P-256 public key."""
    key = load_pem_public_key(base64.b64decode(b64_pem, validate=True))
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError("SESSION_TOKEN_PUBLIC_KEY_B64 must hold a P-256 (ES256) public key")
    return key


def verify_ims_token(token: str) -> Caller:
    """Verify an IMS access token (RS256 only, against the IMS key set) and return the caller."""
    try:
        signing_key = _jwks_client(settings.IMS_JWKS_URL).get_signing_key_from_jwt(token)
        claims = jwt.decode(
            token,
            signing_key.key,
            algorithms=["RS256"],
            audience=settings.IMS_AUDIENCE,
            issuer=settings.IMS_ISSUER,
            options={"require": ["exp", "iss", "aud", "user_id"]},
            leeway=IMS_LEEWAY_SECONDS,
        )
    except jwt.PyJWKClientConnectionError as exc:
        log.warning("IMS key set unreachable", extra={"reason": type(exc).__name__})
        raise InvalidBearer("jwks_unreachable") from exc
    except (jwt.PyJWTError, ValueError) as exc:
        raise InvalidBearer(type(exc).__name__) from exc
    user_id, orgs = claims.get("user_id"), claims.get("org_ids") or []
    if not isinstance(user_id, str) or not user_id or not isinstance(orgs, list):
        raise InvalidBearer("bad_claims")
    return Caller(user_id=user_id, org_ids=frozenset(o for o in orgs if isinstance(o, str)), bearer=token, kind=IMS)


def verify_session_token(token: str) -> Caller:
    """Verify a SpaceCat session token (ES256 only, the configured key and issuer) and return the caller."""
    if not settings.SESSION_TOKENS_ENABLED:
        raise InvalidBearer("session_tokens_disabled")
    try:
        claims = jwt.decode(
            token,
            session_public_key(settings.SESSION_TOKEN_PUBLIC_KEY_B64),
            algorithms=["ES256"],
            issuer=settings.SESSION_TOKEN_ISSUER,
            leeway=SESSION_LEEWAY_SECONDS,
            audience=settings.SESSION_TOKEN_AUDIENCE or None,
            options={
                "require": ["exp", "iss", "sub", *(["aud"] if settings.SESSION_TOKEN_AUDIENCE else [])],
                "verify_aud": bool(settings.SESSION_TOKEN_AUDIENCE),
            },
        )
    except (jwt.PyJWTError, ValueError) as exc:
        raise InvalidBearer(type(exc).__name__) from exc
    if any(name in claims and not _is_number(claims[name]) for name in ("exp", "iat", "nbf")):
        raise InvalidBearer("bad_time_claims")  # as the original's verifier: a time is a JSON number
    user_id, tenants = claims.get("sub"), claims.get("tenants") or []
    is_admin, read_only = claims.get("is_admin") is True, claims.get("is_read_only_admin") is True
    if not isinstance(user_id, str) or not user_id or not isinstance(tenants, list) or (is_admin and read_only):
        raise InvalidBearer("bad_claims")
    orgs = {
        t["id"] if ORG_SUFFIX in t["id"] else t["id"] + ORG_SUFFIX
        for t in tenants
        if isinstance(t, dict) and isinstance(t.get("id"), str) and t["id"]
    }
    return Caller(
        user_id=user_id,
        org_ids=frozenset(orgs),
        bearer=token,
        kind=SESSION,
        is_admin=is_admin,
        is_read_only_admin=read_only,
    )


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def session_cookies(request) -> int:
    """How many `sessionToken` cookies the request's Cookie header carries (Django keeps only the last)."""
    header = request.META.get("HTTP_COOKIE", "")
    return sum(1 for part in header.split(";") if part.split("=", 1)[0].strip() == SESSION_COOKIE)


def verify_bearer(token: str, *, session_only: bool = False) -> Caller:
    """Verify a bearer of either kind, chosen by its `alg` header: RS256 is an IMS token, ES256 a session
    token; nothing else is accepted. Raises InvalidBearer."""
    try:
        alg = jwt.get_unverified_header(token).get("alg")
    except jwt.PyJWTError as exc:
        raise InvalidBearer(type(exc).__name__) from exc
    if alg == "ES256":
        return verify_session_token(token)
    if alg == "RS256" and not session_only:
        return verify_ims_token(token)
    raise InvalidBearer("unsupported_alg")


class BearerAuthentication(authentication.BaseAuthentication):
    """DRF authentication: `Authorization: Bearer <IMS access token or session token>`, else the
    `sessionToken` cookie (a session token). None of them -> 401 from the permission check; invalid -> 401."""

    www_authenticate_realm = "serenity"

    def authenticate(self, request):
        header = request.headers.get("Authorization", "")
        cookie = request.COOKIES.get(SESSION_COOKIE, "")
        if not header and not cookie:
            return None  # -> NotAuthenticated (401) from the permission check
        if not header and session_cookies(request) > 1:
            # Two session cookies: one may have been set by a sibling subdomain. Neither is chosen.
            log.info("bearer rejected", extra={"reason": "duplicate_session_cookie"})
            raise exceptions.AuthenticationFailed("The bearer token is invalid or expired.")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise exceptions.AuthenticationFailed("Expected `Authorization: Bearer <token>`.")
        try:
            caller = verify_bearer(token.strip()) if header else verify_bearer(cookie.strip(), session_only=True)
        except InvalidBearer as exc:
            log.info("bearer rejected", extra={"reason": str(exc)})
            raise exceptions.AuthenticationFailed("The bearer token is invalid or expired.") from None
        return caller, None

    def authenticate_header(self, request):
        return f'Bearer realm="{self.www_authenticate_realm}"'
