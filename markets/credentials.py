"""What a request acts with in Semrush (SPEC §3 "Who may call"): its promise headers, the credential they make
with the caller's bearer, and how the request wants prompts (`semrush_generation`). Shared by the entry points,
re-authorisation and regeneration.

The promise headers and the credential they make are one subject, read in this order by every request that
writes to Semrush, so they are one module: `x-promise-audience` picks the IMS client pair, `x-promise-token`
(with the caller's bearer) what the request acts with. The async-generation flag is here too because
`semrush_generation` is where a request's way of getting prompts is decided; the regeneration endpoint reads it
as well.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings

from serenity.auth import Caller
from tokens import pairs
from tokens.delegation import PROMISE_TOKEN_HEADER, RequestCredential, request_credential, require_promise_token
from tokens.exceptions import InvalidAudience, PromisePairRequired

AUDIENCE_HEADER = "x-promise-audience"


@dataclass(frozen=True)
class PromiseHeaders:
    """The promise headers as the request sent them, read once by the view (`PromiseHeaders.of(request.headers)`)
    and handed on: nothing below the views reads the HTTP request. Neither is parsed or checked yet."""

    audience: str | None = None  # x-promise-audience: which IMS client pair
    # x-promise-token: the promise token, with the caller's bearer; kept out of the repr, so no log line,
    # traceback or debug page shows it.
    token: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> "PromiseHeaders":
        return cls(audience=headers.get(AUDIENCE_HEADER), token=headers.get(PROMISE_TOKEN_HEADER))


def promise_pair(promise: PromiseHeaders) -> pairs.ClientPair:
    """The client pair `x-promise-audience` selects: `semrush` (trimmed, any case) the Semrush pair, absent or
    empty the default pair; anything else is a 400 naming the value (printable characters, 40 at most)."""
    try:
        return pairs.pair_from_audience(promise.audience)
    except pairs.UnknownAudience:
        shown = "".join(ch for ch in promise.audience or "" if " " <= ch <= "~")[:40]
        raise InvalidAudience(f"Unknown promise audience: {shown}") from None


def semrush_pair(promise: PromiseHeaders, *, purpose: str) -> pairs.ClientPair:
    """The Semrush pair, which a job writing to Semrush needs: any other audience is a 400 saying that
    `purpose` ("Re-authentication", "Regeneration") requires it."""
    pair = promise_pair(promise)
    if pair.name != pairs.SEMRUSH:
        raise PromisePairRequired(f"{purpose} requires the Semrush promise pair (x-promise-audience: semrush)")
    return pair


def require_semrush_credential(caller: Caller, promise: PromiseHeaders) -> None:
    """Refuse at once what can never reach Semrush: a session caller without `x-promise-token` (401), an
    unknown audience (400). Checked before anything else, as the original does; nothing is called."""
    require_promise_token(caller, promise.token)
    promise_pair(promise)


def async_generation_enabled() -> bool:
    """SERENITY_ASYNC_PROMPT_GEN: `true` in any case turns the producer on."""
    return str(settings.SERENITY_ASYNC_PROMPT_GEN).strip().lower() == "true"


@contextmanager
def semrush_credential(caller: Caller, promise: PromiseHeaders, *, ims_org_id: str) -> Iterator[RequestCredential]:
    """What a request that only reads or deletes in Semrush for the organization `ims_org_id` acts with (it makes
    no job): the exchanged `x-promise-token` on the pair `x-promise-audience` selects (minted for that
    organization), else the caller's IMS bearer. The promise token IMS rotates for it serves nothing here, and is
    invalidated when the request ends."""
    credential = request_credential(
        caller=caller, header=promise.token, pair=promise_pair(promise), ims_org_id=ims_org_id
    )
    try:
        yield credential
    finally:
        credential.release()


@dataclass
class Generation:
    """How a request wants prompts: the async producer (flag on + generatePrompts) or the old path, and what it
    acts with (`credential`: the request's Semrush bearer, what it mints from, and the promise token IMS rotated
    for it, which serves at most one new job of the request: a token has one owner)."""

    use_async: bool
    credential: RequestCredential
    pair: pairs.ClientPair | None = None


@contextmanager
def semrush_generation(
    caller: Caller,
    promise: PromiseHeaders,
    *,
    ims_org_id: str,
    generate_prompts: bool,
    pair: pairs.ClientPair | None = None,
    use_async: bool | None = None,
) -> Iterator[Generation]:
    """What the request acts with in Semrush for the organization `ims_org_id` (the exchanged `x-promise-token`,
    minted for that organization, else the caller's IMS bearer) and how it wants prompts: the producer with the
    flag on and `generatePrompts: true`, else the old path. When the request ends, a promise token IMS rotated for
    it that no job took is invalidated."""
    pair = pair or promise_pair(promise)
    credential = request_credential(caller=caller, header=promise.token, pair=pair, ims_org_id=ims_org_id)
    if use_async is None:
        use_async = async_generation_enabled() and generate_prompts
    try:
        yield Generation(use_async=use_async, credential=credential, pair=pair)
    finally:
        credential.release()
