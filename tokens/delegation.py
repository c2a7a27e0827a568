"""What a request acts with in Semrush and IMS (SPEC §3 "Who may call", §4.5, §11).

- With an `x-promise-token` header: it is URL-decoded (as the original does; a value that is not valid
  percent-encoding is used as it is), taken bare (the original's form) or as the typed JSON object
  `{promise_token, token_type, expires_in}`, and exchanged at IMS on the pair `x-promise-audience` selects.
  The access token IMS returns is what the request's Semrush calls carry and what new promise tokens are
  minted from; the rotated promise token it hands back (typed, its lifetime known) belongs to the request and
  serves its first new job. A bare token never becomes a job's credential as it stands, only what IMS returns
  for it. A failed exchange, or a token of another user, answers 401 "Invalid or expired promise token".
  The token acts only for an organization the bearer it was minted from named (the access token's `org_ids`):
  for any other, even one the caller may act on, 403 as the organization check answers a non-member.
- Without it: the caller's IMS bearer, for an IMS caller; a session caller has none to offer Semrush (401
  PROMISE_TOKEN_REQUIRED, naming the header).

A rotated token no job took is invalidated at IMS when the request ends (`release`). Every call here that
reaches IMS is a network call: never inside a transaction.
"""

import json
import logging
from dataclasses import dataclass, field
from urllib.parse import unquote

from serenity import metrics
from serenity.auth import Caller
from serenity.clients.http import ClientError, TransientError
from serenity.problems import DomainError, Forbidden
from tokens.clients import ims
from tokens.exceptions import InvalidForwardedToken
from tokens.pairs import ClientPair
from tokens.services import promise_invalidate_quietly
from tokens.types import ForwardedPromise, InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)

PROMISE_TOKEN_HEADER = "x-promise-token"
# What `forwarded_promise` takes without a 400, for the API schema: a bare token (whatever does not open, once
# trimmed and URL-decoded, a JSON object), or the typed object in its plain JSON form (no `%`, so that decoding
# leaves it as it is). A bare value IMS will not exchange is a 401, like a typed one: that is the exchange's to say.
_TRIMMED = r"[\s\x1c-\x1f\x85]*"
_JSON_TEXT = r'"[^"\\%\x00-\x1f]*[^"\\%\s\x00-\x1f\x85][^"\\%\x00-\x1f]*"'
PROMISE_TOKEN_PATTERN = (
    rf"^(?:(?!{_TRIMMED}(?:\{{|%7[Bb]))[\s\S]*"
    rf'|[ \t]*\{{"promise_token": ?{_JSON_TEXT}, ?"token_type": ?"promise_token",'
    r' ?"expires_in": ?[1-9][0-9]{0,5}\}[ \t]*)$'
)
WWW_AUTHENTICATE = {"WWW-Authenticate": 'Bearer realm="serenity"'}


class PromiseTokenRequired(DomainError):
    """A session caller asked for work in Semrush without a promise token to do it with."""

    status, code, title = 401, "PROMISE_TOKEN_REQUIRED", "x-promise-token is required"

    def __init__(self) -> None:
        super().__init__(
            f"Serenity proxy requires IMS authentication; send the {PROMISE_TOKEN_HEADER} header instead",
            headers=WWW_AUTHENTICATE,
        )


class PromiseTokenRejected(DomainError):
    status, code, title = 401, "promise_token_rejected", "Invalid or expired promise token"

    def __init__(self) -> None:
        super().__init__(headers=WWW_AUTHENTICATE)


class PromiseTokenOrganizationRefused(Forbidden):
    """A forwarded promise token whose minting bearer did not name the organization the request acts on: the
    same answer as the organization check's refusal of a non-member (its code, title and message), so the
    answer tells nothing more about the token or the organization."""

    code, title = "organization_access_denied", "User does not have access to this organization"


def forwarded_promise(header: str | None) -> PromiseToken | ForwardedPromise | None:
    """The `x-promise-token` header's token, bare or typed; None when absent or empty. Raises
    InvalidForwardedToken (400) for a typed object that is not a promise token (its type, its lifetime)."""
    if header is None or not header.strip():
        return None
    try:
        value = unquote(header.strip(), errors="strict")
    except UnicodeDecodeError:
        value = header.strip()  # not percent-encoded UTF-8: the value as sent, as the original does
    if not value.startswith("{"):
        return ForwardedPromise(promise_token=value)
    try:
        return PromiseToken.parse(json.loads(value))
    except (ValueError, RecursionError) as exc:
        message = str(exc) if isinstance(exc, InvalidPromiseToken) else "x-promise-token is not a valid typed token"
        raise InvalidForwardedToken(message) from None


def require_promise_token(caller: Caller, header: str | None) -> None:
    """Refuse at once a session caller with no promise token, before anything else is done (the original
    answers this first). Raises PromiseTokenRequired."""
    if caller.ims_token is None and forwarded_promise(header) is None:
        raise PromiseTokenRequired()


@dataclass
class RequestCredential:
    """What one request acts with: `semrush_bearer` for its Semrush calls, `mint_bearer` to mint promise
    tokens from (both an IMS access token), and the promise token IMS rotated for it, if any, for one job."""

    pair: ClientPair
    semrush_bearer: str = field(repr=False)
    mint_bearer: str = field(repr=False)
    promise: PromiseToken | None = None

    def take_promise(self) -> PromiseToken | None:
        """The request's rotated promise token, once: a token has one owner."""
        token, self.promise = self.promise, None
        return token

    def release(self) -> None:
        """Invalidate at IMS a rotated token no job took (best effort: an invalidation IMS does not answer is
        logged, and the token stays live until it expires)."""
        token = self.take_promise()
        if token is not None:
            promise_invalidate_quietly(pair=self.pair, token=token)


def request_credential(*, caller: Caller, header: str | None, pair: ClientPair, ims_org_id: str) -> RequestCredential:
    """The request's credential for work in the organization `ims_org_id` (which the caller was checked to
    reach): the exchanged forwarded token, else the caller's IMS bearer. Raises PromiseTokenRequired,
    InvalidForwardedToken (400, a malformed typed object), PromiseTokenRejected (401: not exchanged, or another
    user's) or PromiseTokenOrganizationRefused (403: minted from a bearer that did not name the organization)."""
    forwarded = forwarded_promise(header)
    if forwarded is None:
        if caller.ims_token is None:
            raise PromiseTokenRequired()
        return RequestCredential(pair=pair, semrush_bearer=caller.ims_token, mint_bearer=caller.ims_token)
    try:
        exchanged = ims.exchange(promise=forwarded, pair=pair)
    except (ClientError, InvalidPromiseToken) as exc:
        if isinstance(exc, TransientError) and exc.maybe_processed:
            # IMS may have rotated the token with its answer lost: a live token nobody holds, until it expires.
            log.warning("forwarded promise token exchange answer lost", extra={"pair": pair.name})
            metrics.emit(PromiseExchangeAnswerLost=(1, metrics.COUNT))
        log.info("forwarded promise token not exchanged", extra={"pair": pair.name, "reason": type(exc).__name__})
        raise PromiseTokenRejected() from None
    if exchanged.user_id != caller.user_id:
        log.warning("forwarded promise token of another user refused", extra={"pair": pair.name})
        promise_invalidate_quietly(pair=pair, token=exchanged.rotated)
        raise PromiseTokenRejected()
    if ims_org_id not in exchanged.org_ids:
        log.warning("forwarded promise token of another organization refused", extra={"pair": pair.name})
        promise_invalidate_quietly(pair=pair, token=exchanged.rotated)
        raise PromiseTokenOrganizationRefused()
    access = exchanged.access.access_token
    return RequestCredential(pair=pair, semrush_bearer=access, mint_bearer=access, promise=exchanged.rotated)
