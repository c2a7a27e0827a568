"""Keyed fingerprints of token values: a stable name for a token that reveals nothing about it."""

from django.utils.crypto import salted_hmac


def token_fingerprint(value: str) -> str:
    """HMAC-SHA256 of `value` under a key derived from SECRET_KEY (64 hex digits). Equal tokens have equal
    fingerprints; without the key a fingerprint cannot be checked against a guessed token."""
    return salted_hmac("serenity.tokens.fingerprint", value, algorithm="sha256").hexdigest()
