"""What a request's promise headers say (SPEC §3 "Who may call"): `x-promise-audience` picks the IMS client pair,
`x-promise-token` (with the caller's bearer) what the request acts with in Semrush. Shared by the entry points,
re-authorisation and regeneration; what the request then acts with is `semrush_generation` in
markets/generation/producer.py."""

from tokens import pairs
from tokens.delegation import PROMISE_TOKEN_HEADER, require_promise_token
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


def read_promise_token_header(request) -> str | None:
    """The `x-promise-token` header as the request sent it (None when absent), not yet parsed or checked."""
    return request.headers.get(PROMISE_TOKEN_HEADER)


def require_semrush_credential(request) -> None:
    """Refuse at once what can never reach Semrush: a session caller without `x-promise-token` (401), an
    unknown audience (400). Checked before anything else, as the original does; nothing is called."""
    require_promise_token(request.user, read_promise_token_header(request))
    promise_pair(request)
