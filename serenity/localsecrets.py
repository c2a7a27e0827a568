"""Per-checkout secrets for local runs, minted on first use and kept out of git (under var/)."""

import base64
import json
import secrets
from pathlib import Path

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def _session_signing_key() -> dict:
    """The local sign-in simulator's ES256 key pair: the private key signs session tokens, the public one is
    what the API verifies them with (SESSION_TOKEN_PUBLIC_KEY_B64, base64 of an SPKI PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "SESSION_TOKEN_PRIVATE_KEY_PEM": private.decode(),
        "SESSION_TOKEN_PUBLIC_KEY_B64": base64.b64encode(public).decode(),
    }


def _mint() -> dict:
    return {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "PROMISE_TOKEN_KEYS": Fernet.generate_key().decode(),
        **_session_signing_key(),
    }


NAMES = ("SECRET_KEY", "PROMISE_TOKEN_KEYS", "SESSION_TOKEN_PRIVATE_KEY_PEM", "SESSION_TOKEN_PUBLIC_KEY_B64")


def _complete(path: Path) -> dict | None:
    values = json.loads(path.read_text()) if path.exists() else {}
    return values if all(name in values for name in NAMES) else None


def load_or_create(path: Path) -> dict:
    """Return the local secrets at `path`, creating them once, and adding to a file an older version wrote the
    ones it lacks (those it has are kept). Never used outside local runs."""
    values = _complete(path)
    if values is not None:
        return values
    values = {**_mint(), **(json.loads(path.read_text()) if path.exists() else {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(values))
    tmp.chmod(0o600)
    if _complete(path) is not None:
        tmp.unlink()  # two processes starting together: the one that finished first stands
    else:
        tmp.replace(path)
    return json.loads(path.read_text())
