"""IMS client: mint, exchange (rotates) and invalidate promise tokens. The only IMS HTTP code.

Wire contract (form-encoded POSTs on IMS_HOST; see docs/simulators/ims.md):
- mint:       POST /ims/token/v4  grant_type=promise_token_mint, client_id, client_secret,
              definition_id, user_token        -> {promise_token, token_type, expires_in}
- exchange:   POST /ims/token/v4  grant_type=promise_token_exchange, client_id, client_secret,
              promise_token                    -> {access_token, token_type, expires_in,
                                                   promise: {promise_token, token_type, expires_in}}
- invalidate: POST /ims/invalidate_token/v2  client_id, client_secret, token_type=promise_token, token
"""
import logging

import httpx
from django.conf import settings

from serenity.clients import http
from tokens.exceptions import NeedsReauth
from tokens.pairs import ClientPair
from tokens.types import AccessToken, InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)

TOKEN_PATH = "/ims/token/v4"
INVALIDATE_PATH = "/ims/invalidate_token/v2"


def _client() -> httpx.Client:
    return httpx.Client(base_url=settings.IMS_HOST, timeout=settings.IMS_TIMEOUT_SECONDS)


def mint(*, bearer: str, pair: ClientPair) -> PromiseToken:
    """Mint a promise token from a user bearer with the pair's emitter client.

    Raises ReauthRequired (the bearer was refused), TransientError, PermanentError.
    """
    with _client() as client:
        response = http.request(
            client, "POST", TOKEN_PATH, what="ims.mint", max_attempts=2,
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


def exchange(*, promise: PromiseToken, pair: ClientPair) -> tuple[AccessToken, PromiseToken]:
    """Exchange a promise token for an access token with the pair's consumer client.

    IMS rotates the promise token on every exchange: the returned PromiseToken replaces the one given,
    which is no longer valid. Raises NeedsReauth on 401/403 (decided from the status), InvalidPromiseToken
    for a bare value, TransientError, PermanentError.
    """
    if not isinstance(promise, PromiseToken):
        raise InvalidPromiseToken("exchange needs a typed promise token")
    try:
        with _client() as client:
            response = http.request(
                client, "POST", TOKEN_PATH, what="ims.exchange", max_attempts=3,
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
    access, expires_in = body.get("access_token"), body.get("expires_in")
    if not isinstance(access, str) or not access or not isinstance(expires_in, int):
        raise http.PermanentError("ims.exchange: no access token in the response")
    try:
        rotated = PromiseToken.parse(body.get("promise"))
    except InvalidPromiseToken as exc:
        raise http.PermanentError(f"ims.exchange: rotated promise token unusable ({exc})") from None
    return AccessToken(access_token=access, expires_in=expires_in), rotated


def invalidate(*, promise: PromiseToken, pair: ClientPair) -> None:
    """Invalidate a promise token. Raises TransientError / PermanentError / ReauthRequired."""
    with _client() as client:
        http.request(
            client, "POST", INVALIDATE_PATH, what="ims.invalidate", max_attempts=2,
            data={
                "client_id": pair.consumer_client_id,
                "client_secret": pair.consumer_client_secret,
                "token_type": "promise_token",
                "token": promise.promise_token,
            },
        )
