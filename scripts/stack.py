"""The product as production runs it, on PostgreSQL, for the scripts that measure or shake it (`make bench`,
`make soak`) and the tests that drive those scripts.

A Stack owns a scratch directory, a set of ports and a Runner (scripts/run_local.py): it recreates the
database, starts the local SQS (moto's server mode), migrates, bootstraps the queues, and starts gunicorn
servers (the API, the simulators in their own server), Celery workers and beat, each in its own process
group so that it can be signalled, killed and started again. Ports come from the kernel, or from
`first_port` upwards when the caller must stay inside a range.
"""

import importlib.util
import os
import socket
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent

_spec = importlib.util.spec_from_file_location("run_local", ROOT / "scripts" / "run_local.py")
assert _spec is not None and _spec.loader is not None, "scripts/run_local.py is missing"
run_local = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_local)
Failed, Runner, http_ok, port_open = run_local.Failed, run_local.Runner, run_local.http_ok, run_local.port_open


HARNESS_APP_NAME = "serenity-harness"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recreate_database(url: str) -> None:
    """Drop (connections and all) and create the database named by `url`."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


class Stack:
    """The processes of one run. `env` is every child's environment; `ports[name]` their ports."""

    def __init__(
        self,
        *,
        database_url: str,
        names: tuple[str, ...],
        env: dict,
        settings_module: str,
        prefix: str,
        first_port: int | None = None,
        ports: dict[str, int] | None = None,
    ):
        self.var = Path(tempfile.mkdtemp(prefix=prefix))
        if ports is not None:  # the ports of an earlier stack of this process (whose settings name them)
            self.ports = dict(ports)
        elif first_port is None:
            self.ports = {name: free_port() for name in names}
        else:
            self.ports = {name: first_port + i for i, name in enumerate(names)}
            busy = [f"{name} ({port})" for name, port in self.ports.items() if port_open("127.0.0.1", port)]
            if busy:
                raise Failed(f"ports already in use: {', '.join(busy)}")
        self.database_url = database_url
        self.env = {
            # Not this process's PGAPPNAME: once the harness has configured Django it names the harness's own
            # connections, and the product's must not pass for the harness's (scripts/soak/ leaves those alone).
            **{k: v for k, v in os.environ.items() if k != "PGAPPNAME"},
            "SERENITY_ENVIRONMENT": "local",
            "DJANGO_SETTINGS_MODULE": settings_module,
            "DATABASE_URL": database_url,
            "SERENITY_VAR_DIR": str(self.var),
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.ports['sqs']}",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        if "sim" in self.ports:
            self.env["LOCAL_BASE_URL"] = f"http://127.0.0.1:{self.ports['sim']}"
        self.runner = Runner(self.env)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    # --- start-up --------------------------------------------------------------------------------------
    def start_infrastructure(self, *, sqs_ledger: Path | None = None) -> None:
        """A fresh database, the local SQS (keeping its ledger of receipts in `sqs_ledger`, scripts/local_sqs.py),
        the schema and the queues."""
        recreate_database(self.database_url)
        port = self.ports["sqs"]
        self.runner.start(
            "sqs",
            [PYTHON, str(ROOT / "scripts" / "local_sqs.py"), "-H", "127.0.0.1", "-p", str(port)],
            log_file=self.var / "sqs.log",
            env={"LOCAL_SQS_LEDGER": str(sqs_ledger)} if sqs_ledger else None,
        )
        self.runner.wait_until("the local SQS", lambda: port_open("127.0.0.1", port), 30)
        manage = [PYTHON, "manage.py"]
        self.runner.run_step("migrate", [*manage, "migrate", "--noinput", "-v", "0"])
        self.runner.run_step("bootstrap queues", [*manage, "bootstrap_queues", "--local"])

    def gunicorn(
        self,
        name: str,
        port_name: str,
        *,
        access_log: Path | None = None,
        log_file: Path | None = None,
        wait: bool = True,
        **env,
    ):
        """Start gunicorn as production does, on the port named `port_name`; wait for /healthz."""
        port = self.ports[port_name]
        argv = [
            str(BIN / "gunicorn"),
            "-c",
            "python:serenity.gunicorn",
            "serenity.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--access-logfile",
            str(access_log or "/dev/null"),
        ]
        proc = self.runner.start(name, argv, log_file=log_file or self.var / f"{name}.log", env=env)
        if wait:
            self.runner.wait_until(name, lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), 60)
        return proc

    def worker(
        self,
        name: str,
        *,
        app: str = "serenity",
        queues: str,
        threads: int,
        log_file: Path | None = None,
        level: str = "WARNING",
        **env,
    ):
        """A Celery worker as the image's `worker` role starts it (docker/serenity-entrypoint): threads pool, no remote
        control."""
        argv = [
            str(BIN / "celery"),
            "-A",
            app,
            "worker",
            "-P",
            "threads",
            "-c",
            str(threads),
            "-Q",
            queues,
            "-n",
            f"{name}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            level,
        ]
        return self.runner.start(name, argv, log_file=log_file or self.var / f"{name}.log", env=env)

    def beat(self, name: str = "beat", *, log_file: Path | None = None, **env):
        argv = [
            str(BIN / "celery"),
            "-A",
            "serenity",
            "beat",
            "-l",
            "WARNING",
            "-s",
            str(self.var / "celerybeat-schedule"),
        ]
        return self.runner.start(name, argv, log_file=log_file or self.var / f"{name}.log", env=env)

    def setup_django(self, **overrides: str) -> None:
        """Configure Django in this process against the stack's database (the harness reads it directly);
        `overrides` are this process's settings where they differ from its children's (its pool's size)."""
        os.environ.update({k: v for k, v in self.env.items() if k not in ("PYTHONUNBUFFERED",)})
        os.environ.update(overrides)
        os.environ["PGAPPNAME"] = HARNESS_APP_NAME  # libpq's: tells this process's connections from the product's
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()

    def stop(self) -> None:
        self.runner.stop_all()
