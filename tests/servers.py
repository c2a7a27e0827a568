"""The API served by gunicorn with the product's configuration, on the test database, for the tests that talk
to it over a real socket (gunicorn's own answers, its logs, its restarts)."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Gunicorn:
    port: int
    master: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def workers(self) -> set[int]:
        """The pids of the master's worker processes now (Linux)."""
        children = Path(f"/proc/{self.master.pid}/task/{self.master.pid}/children")
        try:
            return {int(pid) for pid in children.read_text().split()}
        except FileNotFoundError:
            return set()


@contextmanager
def gunicorn(log_dir: Path, **env) -> Iterator[Gunicorn]:
    """The API served by gunicorn with the product's configuration, on the test database; its stdout (the
    access log) and stderr (every other line) written under `log_dir`. Stopped (SIGTERM) at the end."""
    port = free_port()
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        **env,
    }
    with open(log_dir / "stdout.log", "wb") as out, open(log_dir / "stderr.log", "wb") as err:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "-c",
                "python:serenity.gunicorn",
                "--bind",
                f"127.0.0.1:{port}",
                "serenity.wsgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline and server.poll() is None, "gunicorn did not start"
                    time.sleep(0.2)
            yield Gunicorn(port, server)
        finally:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
