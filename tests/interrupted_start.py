"""Run `manage.py` exactly as the shell does, signalling itself (SIGTERM or SIGINT, the first argument) while
Django starts up: settings loaded, apps not yet imported, no command chosen.

Run by tests/jobs/test_command_exit_codes.py as a separate process: `python tests/interrupted_start.py SIGTERM doctor`.
"""

import os
import runpy
import signal
import sys
from pathlib import Path

import django

REPO = Path(__file__).resolve().parents[1]
_setup = django.setup


def setup(*args, **kwargs):
    os.kill(os.getpid(), signal.Signals[SIGNAL])
    return _setup(*args, **kwargs)


if __name__ == "__main__":
    SIGNAL = sys.argv[1]
    django.setup = setup
    sys.argv = [str(REPO / "manage.py"), *sys.argv[2:]]
    sys.path.insert(0, str(REPO))
    runpy.run_path(str(REPO / "manage.py"), run_name="__main__")
