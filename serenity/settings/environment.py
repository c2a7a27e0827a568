"""Which environment this process runs in, and how a value is read from it.

There is no implicit environment: every process names its own in SERENITY_ENVIRONMENT. `local` (the
embedded run, `make run`, the compose stack) and `test` (the suite) get safe embedded defaults and may
mount the simulators; anything else is a deployment, with no default for a value that cannot be safe.
Every variable may also be given as NAME_FILE, a path whose content is the value (container secrets).
"""

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.FileAwareEnv()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False) if (BASE_DIR / ".env").exists() else None

LOCAL_ENVIRONMENTS = ("local", "test")
ENVIRONMENT = env.str("SERENITY_ENVIRONMENT", default="").strip()
if not ENVIRONMENT:
    raise ImproperlyConfigured(
        "SERENITY_ENVIRONMENT must be set: `local` for the embedded run (make run sets it), `test` for the "
        "suite, or the deployment's name (e.g. `production`). See docker/.env.example."
    )
IS_LOCAL = ENVIRONMENT in LOCAL_ENVIRONMENTS

# Local state of the embedded run: the SQLite database, locally minted secrets, logs.
VAR_DIR = Path(env.str("SERENITY_VAR_DIR", default=str(BASE_DIR / "var")))


def required(name: str, local_default=None, cast=str):
    """A value that a deployment must set explicitly; local runs may fall back to `local_default`."""
    value = env.get_value(name, cast=cast, default=None)
    if value not in (None, ""):
        return value
    if IS_LOCAL and local_default is not None:
        return local_default
    raise ImproperlyConfigured(
        f"{name} must be set when SERENITY_ENVIRONMENT={ENVIRONMENT!r} (see docker/.env.example)."
    )
