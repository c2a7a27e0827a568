"""Per-checkout secrets for local runs, minted on first use and kept out of git (under var/)."""
import json
import secrets
from pathlib import Path

from cryptography.fernet import Fernet


def load_or_create(path: Path) -> dict:
    """Return the local secrets at `path`, creating them once. Never used outside local runs."""
    if path.exists():
        return json.loads(path.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    values = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "PROMISE_TOKEN_KEYS": Fernet.generate_key().decode(),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(values))
    tmp.chmod(0o600)
    try:
        # Two processes starting together: the first rename wins, the other reads it back.
        tmp.replace(path) if not path.exists() else tmp.unlink()
    except FileNotFoundError:
        pass
    return json.loads(path.read_text())
