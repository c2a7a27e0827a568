"""What a request's promise headers say (SPEC §3 "Who may call"): `x-promise-audience` picks the IMS client pair,
`x-promise-token` (with the caller's bearer) what the request acts with in Semrush. Shared by the entry points,
re-authorisation and regeneration."""
from collections.abc import Iterator
from contextlib import contextmanager

from markets.producer import Generation, async_generation_enabled
from tokens import pairs
from tokens.delegation import PROMISE_TOKEN_HEADER, request_credential, require_promise_token
from tokens.exceptions import InvalidAudience, PromisePairRequired

AUDIENCE_HEADER = "x-promise-audience"


def promise_pair(request) -> pairs.ClientPair:
    """The client pair `x-promise-audience` selects: `semrush` (trimmed, any case) the Semrush pair, absent or
    empty the default pair; anything else is a 400 naming the value (printable characters, 40 at most)."""
    audience = request.headers.get(AUDIENCE_HEADER)
    try:
        return pairs.pair_from_audience(audience)
    except pairs.UnknownAudience:
        shown = "".join(ch for ch in audience if " " <= ch <= "~")[:40]
        raise InvalidAudience(f"Unknown promise audience: {shown}") from None


def semrush_pair(request, *, purpose: str) -> pairs.ClientPair:
    """The Semrush pair, which a job writing to Semrush needs: any other audience is a 400 saying that
    `purpose` ("Re-authentication", "Regeneration") requires it."""
    pair = promise_pair(request)
    if pair.name != pairs.SEMRUSH:
        raise PromisePairRequired(f"{purpose} requires the Semrush promise pair (x-promise-audience: semrush)")
    return pair


def promise_token_header(request) -> str | None:
    return request.headers.get(PROMISE_TOKEN_HEADER)


def require_semrush_credential(request) -> None:
    """Refuse at once what can never reach Semrush: a session caller without `x-promise-token` (401), an
    unknown audience (400). Checked before anything else, as the original does; nothing is called."""
    require_promise_token(request.user, promise_token_header(request))
    promise_pair(request)


@contextmanager
def semrush_generation(request, *, generate_prompts: bool, pair: pairs.ClientPair | None = None,
                       use_async: bool | None = None) -> Iterator[Generation]:
    """What the request acts with in Semrush (the exchanged `x-promise-token`, else the caller's IMS bearer) and
    how it wants prompts: the producer with the flag on and `generatePrompts: true`, else the old path. When
    the request ends, a promise token IMS rotated for it that no job took is invalidated."""
    pair = pair or promise_pair(request)
    credential = request_credential(caller=request.user, header=promise_token_header(request), pair=pair)
    if use_async is None:
        use_async = async_generation_enabled() and generate_prompts
    try:
        yield Generation(use_async=use_async, credential=credential, pair=pair)
    finally:
        credential.release()
