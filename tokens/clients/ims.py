"""IMS client: mint, exchange (rotates) and invalidate promise tokens. The only IMS HTTP code.

Wire contract (form-encoded POSTs on IMS_HOST; see docs/simulators/ims.md):
- mint:       POST /ims/token/v4  grant_type=promise_token_mint, client_id, client_secret,
              definition_id, user_token        -> {promise_token, token_type, expires_in}
- exchange:   POST /ims/token/v4  grant_type=promise_token_exchange, client_id, client_secret,
              promise_token                    -> {access_token, token_type, expires_in, user_id,
                                                   promise: {promise_token, token_type, expires_in}}
              the access token's `org_ids` claim: the organizations the minting bearer named
- invalidate: POST /ims/invalidate_token/v2  client_id, client_secret, token_type=promise_token, token

A mint creates a live credential and an exchange rotates one, so neither is retried in place unless the
failed attempt provably never reached IMS (see serenity.clients.http: `idempotent=False`). Invalidate changes
nothing that a second call would change again, so it retries like any read.
"""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from django.conf import settings

from serenity import metrics
from serenity.clients import http
from tokens.exceptions import NeedsReauth
from tokens.pairs import ClientPair
from tokens.types import PROMISE_TOKEN_TYPE, AccessToken, ForwardedPromise, InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)

TOKEN_PATH = "/ims/token/v4"
INVALIDATE_PATH = "/ims/invalidate_token/v2"


@dataclass(frozen=True)
class Exchanged:
    """What an exchange gives back: the access token, the promise token that replaces the one presented,
    the IMS user the token belongs to, and the organizations the bearer it was minted from named (the access
    token's `org_ids`; empty when it names none, which binds the token to no organization)."""

    access: AccessToken
    rotated: PromiseToken
    user_id: str
    org_ids: frozenset[str] = frozenset()


def access_token_orgs(access_token: str) -> frozenset[str]:
    """The `org_ids` claim of an access token IMS has just handed back in the answer to this client's own
    authenticated call (TLS to IMS_HOST): read as the answer's `user_id` is, without a signature check of its
    own. Anything that is not a JWT with a list of strings there names no organization."""
    try:
        claims = jwt.decode(access_token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return frozenset()
    orgs = claims.get("org_ids")
    if not isinstance(orgs, list):
        return frozenset()
    return frozenset(org for org in orgs if isinstance(org, str) and org)


_places: tuple[int, threading.BoundedSemaphore] | None = None
_places_lock = threading.Lock()


@contextmanager
def _in_flight() -> Iterator[None]:
    """One of this process's IMS_MAX_IN_FLIGHT places for an IMS attempt (0: no bound). A burst (hundreds of a
    worker's threads whose DRS calls return together, each exchanging its promise token) queues here, before
    anything is sent, rather than at IMS: a call that waited at IMS past IMS_TIMEOUT_SECONDS may have rotated
    the token with the answer lost, and is never retried, so its job would need re-authorisation. The wait
    here sends nothing, and an attempt's own timeout starts once it has its place."""
    global _places
    size = settings.IMS_MAX_IN_FLIGHT
    if size <= 0:
        yield
        return
    with _places_lock:
        if _places is None or _places[0] != size:
            _places = (size, threading.BoundedSemaphore(size))
        places = _places[1]
    with places:
        yield


def _client() -> httpx.Client:
    """This thread's pooled IMS client (serenity/clients/http.py): no secret lives on it."""
    return http.pooled_client(settings.IMS_HOST, timeout=settings.IMS_TIMEOUT_SECONDS)


class _Placed:
    """This thread's IMS client, each attempt sent in one of the process's places: a call waiting between two
    attempts (a backoff, a short Retry-After) holds none."""

    def __init__(self, client: httpx.Client):
        self._client = client

    def request(self, *args: Any, **kwargs: Any) -> httpx.Response:
        with _in_flight():
            return self._client.request(*args, **kwargs)


def _post(path: str, **options: Any) -> httpx.Response:
    """One IMS call (serenity.clients.http's `request` with its retry rules), each attempt in one of the
    process's places. A call IMS still throttles (429) after the retries is counted in IMSThrottled: back-pressure,
    not an outage."""
    try:
        return http.request(_Placed(_client()), "POST", path, **options)
    except http.Throttled:
        metrics.emit(IMSThrottled=(1, metrics.COUNT))
        raise


def mint(*, bearer: str, pair: ClientPair) -> PromiseToken:
    """Mint a promise token from a user bearer with the pair's emitter client.

    Retried only when the attempt never reached IMS. Raises ReauthRequired (the bearer was refused),
    TransientError (`maybe_processed` tells whether a token may have been minted with its answer lost),
    PermanentError.
    """
    response = _post(
        TOKEN_PATH,
        what="ims.mint",
        max_attempts=3,
        idempotent=False,
        data={
            "grant_type": "promise_token_mint",
            "client_id": pair.emitter_client_id,
            "client_secret": pair.emitter_client_secret,
            "definition_id": pair.emitter_definition_id,
            "user_token": bearer,
        },
    )
    try:
        return PromiseToken.parse(http.json_object(response, "ims.mint"))
    except InvalidPromiseToken as exc:
        raise http.PermanentError(f"ims.mint: {exc}") from None


def exchange(*, promise: PromiseToken | ForwardedPromise, pair: ClientPair) -> Exchanged:
    """Exchange a promise token for an access token with the pair's consumer client.

    IMS rotates the promise token on every exchange: the returned one replaces the one given, which is no
    longer valid. Never retried once the request may have reached IMS: a second attempt would present a
    token IMS has already rotated away. `promise` is a stored (typed) token, or one a browser forwarded to the
    request being served. Raises NeedsReauth on 401/403 (decided from the status), InvalidPromiseToken for an
    untyped string, TransientError (with `maybe_processed`), PermanentError.
    """
    if not isinstance(promise, (PromiseToken, ForwardedPromise)):
        raise InvalidPromiseToken("exchange needs a promise token")
    try:
        response = _post(
            TOKEN_PATH,
            what="ims.exchange",
            max_attempts=3,
            idempotent=False,
            data={
                "grant_type": "promise_token_exchange",
                "client_id": pair.consumer_client_id,
                "client_secret": pair.consumer_client_secret,
                "promise_token": promise.promise_token,
            },
        )
    except http.ReauthRequired as exc:
        raise NeedsReauth("ims.exchange refused the promise token", status=exc.status) from None
    body = http.json_object(response, "ims.exchange")
    access, expires_in, user_id = body.get("access_token"), body.get("expires_in"), body.get("user_id")
    if not isinstance(access, str) or not access or not isinstance(expires_in, int):
        raise http.PermanentError("ims.exchange: no access token in the response")
    if not isinstance(user_id, str) or not user_id:
        raise http.PermanentError("ims.exchange: the response names no user")
    try:
        rotated = PromiseToken.parse(body.get("promise"))
    except InvalidPromiseToken as exc:
        raise http.PermanentError(f"ims.exchange: rotated promise token unusable ({exc})") from None
    return Exchanged(
        access=AccessToken(access_token=access, expires_in=expires_in),
        rotated=rotated,
        user_id=user_id,
        org_ids=access_token_orgs(access),
    )


def invalidate(*, promise: PromiseToken, pair: ClientPair) -> None:
    """Invalidate a promise token. Raises TransientError / PermanentError / ReauthRequired."""
    _post(
        INVALIDATE_PATH,
        what="ims.invalidate",
        max_attempts=2,
        data={
            "client_id": pair.consumer_client_id,
            "client_secret": pair.consumer_client_secret,
            "token_type": PROMISE_TOKEN_TYPE,
            "token": promise.promise_token,
        },
    )
