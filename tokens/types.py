"""The typed promise token. A bare string is never a promise token: it must say its type and lifetime."""

from dataclasses import dataclass, field
from typing import Any

# The `token_type` IMS gives promise tokens; anything else offered as one is refused.
PROMISE_TOKEN_TYPE = "promise_token"
# The longest lifetime a promise token may claim. IMS issues them for hours; a claim beyond 30 days is not
# something IMS sends, and an unbounded one would overflow the expiry arithmetic.
MAX_EXPIRES_IN = 30 * 24 * 3600


class InvalidPromiseToken(ValueError):
    """Raised when something that is not a typed promise token is offered as one."""

    code = "INVALID_PROMISE_TOKEN"


@dataclass(frozen=True)
class PromiseToken:
    promise_token: str = field(repr=False)
    token_type: str
    expires_in: int

    def __post_init__(self) -> None:
        if not isinstance(self.promise_token, str) or not self.promise_token.strip():
            raise InvalidPromiseToken("promise_token must be a non-empty string")
        if self.token_type != PROMISE_TOKEN_TYPE:
            raise InvalidPromiseToken(f"token_type must be {PROMISE_TOKEN_TYPE!r}")
        if isinstance(self.expires_in, bool) or not isinstance(self.expires_in, int):
            raise InvalidPromiseToken("expires_in must be an integer number of seconds")
        if not 0 < self.expires_in <= MAX_EXPIRES_IN:
            raise InvalidPromiseToken(f"expires_in must be between 1 and {MAX_EXPIRES_IN} seconds")

    @classmethod
    def parse(cls, value: object) -> "PromiseToken":
        """Build from a mapping `{promise_token, token_type, expires_in}`; anything else is refused."""
        if isinstance(value, PromiseToken):
            return value
        if not isinstance(value, dict):
            raise InvalidPromiseToken("a promise token must be a typed object, not a bare value")
        # The values go in as the mapping holds them: __post_init__ checks each one's type and refuses the rest.
        fields: dict[str, Any] = {name: value.get(name) for name in ("promise_token", "token_type", "expires_in")}
        expires_in = fields["expires_in"]
        if isinstance(expires_in, str) and expires_in.isdigit() and len(expires_in) <= 12:
            fields["expires_in"] = int(expires_in)
        return cls(**fields)

    def as_dict(self) -> dict[str, Any]:
        return {"promise_token": self.promise_token, "token_type": self.token_type, "expires_in": self.expires_in}

    def __str__(self) -> str:  # never the value
        return f"PromiseToken(type={self.token_type}, expires_in={self.expires_in})"


@dataclass(frozen=True)
class ForwardedPromise:
    """A promise token as a browser forwarded it, bare (its lifetime unknown): only ever exchanged, in the
    request that carried it, and never stored. What the exchange hands back is typed."""

    promise_token: str = field(repr=False)

    def __str__(self) -> str:  # never the value
        return "ForwardedPromise()"


@dataclass(frozen=True)
class AccessToken:
    access_token: str = field(repr=False)
    expires_in: int

    def __str__(self) -> str:
        return f"AccessToken(expires_in={self.expires_in})"
