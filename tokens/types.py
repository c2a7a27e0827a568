"""The typed promise token. A bare string is never a promise token: it must say its type and lifetime."""
from dataclasses import dataclass, field


class InvalidPromiseToken(ValueError):
    """Raised when something that is not a typed promise token is offered as one."""

    code = "INVALID_PROMISE_TOKEN"


@dataclass(frozen=True)
class PromiseToken:
    promise_token: str = field(repr=False)
    token_type: str
    expires_in: int

    def __post_init__(self):
        if not isinstance(self.promise_token, str) or not self.promise_token.strip():
            raise InvalidPromiseToken("promise_token must be a non-empty string")
        if not isinstance(self.token_type, str) or not self.token_type:
            raise InvalidPromiseToken("token_type must be a non-empty string")
        if isinstance(self.expires_in, bool) or not isinstance(self.expires_in, int) or self.expires_in <= 0:
            raise InvalidPromiseToken("expires_in must be a positive integer")

    @classmethod
    def parse(cls, value) -> "PromiseToken":
        """Build from a mapping `{promise_token, token_type, expires_in}`; anything else is refused."""
        if isinstance(value, PromiseToken):
            return value
        if not isinstance(value, dict):
            raise InvalidPromiseToken("a promise token must be a typed object, not a bare value")
        expires_in = value.get("expires_in")
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)
        return cls(promise_token=value.get("promise_token"), token_type=value.get("token_type"), expires_in=expires_in)

    def as_dict(self) -> dict:
        return {"promise_token": self.promise_token, "token_type": self.token_type, "expires_in": self.expires_in}

    def __str__(self) -> str:  # never the value
        return f"PromiseToken(type={self.token_type}, expires_in={self.expires_in})"


@dataclass(frozen=True)
class AccessToken:
    access_token: str = field(repr=False)
    expires_in: int

    def __str__(self) -> str:
        return f"AccessToken(expires_in={self.expires_in})"
