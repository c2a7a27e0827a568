"""Start another process of the fleet (tests/fleet_process.py) on the test database, and read what it got."""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

REPO = Path(__file__).resolve().parents[1]


def start(kind: str, at: float, threads: int, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`fleet_process.py kind at threads args…` with this test's database and `env` on top of ours."""
    db = settings.DATABASES["default"]
    return subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fleet_process.py"), kind, str(at), str(threads), *args],
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            **(env or {}),
        },
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )


def result(proc: subprocess.Popen) -> dict:
    """The process's JSON line, once it has ended (killed after two minutes)."""
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])
