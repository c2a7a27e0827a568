"""Encryption at rest for promise tokens: MultiFernet over PROMISE_TOKEN_KEYS (newest key first).

Rotation: put a new key first, keep the old ones after it; `rotate()` re-encrypts under the newest.
"""

import json
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from tokens.types import PromiseToken


@lru_cache(maxsize=1)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(k.strip().encode()) for k in keys])


def _current() -> MultiFernet:
    return _fernet(tuple(settings.PROMISE_TOKEN_KEYS))


def seal(token: PromiseToken) -> str:
    return _current().encrypt(json.dumps(token.as_dict()).encode()).decode()


def unseal(ciphertext: str) -> PromiseToken:
    """Decrypt a stored token. Raises InvalidToken when no configured key opens it."""
    return PromiseToken.parse(json.loads(_current().decrypt(ciphertext.encode())))


def rotate(ciphertext: str) -> str:
    return _current().rotate(ciphertext.encode()).decode()


__all__ = ["InvalidToken", "rotate", "seal", "unseal"]
