"""The embedded local run: its SQLite database under concurrent writers, and how `make run` stops its processes."""

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent

# One role of the embedded run, writing the way the product does: a transaction that reads then writes,
# a conditional UPDATE in autocommit (a lease claim), a locked read-modify-write and a plain save().
WRITER = """
import os, sys, threading, uuid
import django
django.setup()
from django.db import connection, transaction
from django.utils import timezone
from jobs.models import AsyncJob, JobEvent

threads, rounds = int(sys.argv[1]), int(sys.argv[2])
errors = []

def work():
    try:
        for _ in range(rounds):
            job_id = uuid.uuid4()
            with transaction.atomic():
                AsyncJob.objects.filter(status="IN_PROGRESS").count()
                AsyncJob.objects.create(id=job_id, job_type="check", organization_id=uuid.uuid4())
                JobEvent.objects.create(job_id=job_id, kind="created")
            AsyncJob.objects.filter(id=job_id, lease_token__isnull=True).update(
                lease_token=uuid.uuid4(), lease_expires_at=timezone.now())
            with transaction.atomic():
                job = AsyncJob.objects.select_for_update().get(id=job_id)
                job.checkpoints = {"written": True}
                job.save(update_fields=["checkpoints"])
            job.phase = "done"
            job.save()
    except Exception as exc:
        errors.append(type(exc).__name__ + ": " + str(exc))
    finally:
        connection.close()

pool = [threading.Thread(target=work) for _ in range(threads)]
[t.start() for t in pool]
[t.join() for t in pool]
print(sorted(set(errors)))
"""


def load_run_local():
    spec = importlib.util.spec_from_file_location("run_local", ROOT / "scripts" / "run_local.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def embedded_env(tmp_path) -> dict:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "serenity.settings",
        "SERENITY_ENVIRONMENT": "local",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'serenity.sqlite3'}",
        # Explicit, so the check never mints the checkout's own local secrets.
        "SECRET_KEY": "embedded-run-check-" + "k" * 40,
        "PROMISE_TOKEN_KEYS": Fernet.generate_key().decode(),
    }


def gone(pid: int, within: float = 3.0) -> bool:
    """True once `pid` has exited (signals are delivered asynchronously, so allow a moment)."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def test_embedded_sqlite_takes_the_api_the_worker_threads_and_beat_writing_at_once(tmp_path):
    env = embedded_env(tmp_path)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True, timeout=60
    )

    roles = {"api": (4, 25), "worker": (8, 25), "beat": (1, 25)}
    procs = {
        role: subprocess.Popen(
            [sys.executable, "-c", WRITER, str(threads), str(rounds)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role, (threads, rounds) in roles.items()
    }
    results = {role: proc.communicate(timeout=120) for role, proc in procs.items()}

    assert {role: (procs[role].returncode, out.strip()) for role, (out, _err) in results.items()} == {
        "api": (0, "[]"),
        "worker": (0, "[]"),
        "beat": (0, "[]"),
    }
    import sqlite3

    with sqlite3.connect(tmp_path / "serenity.sqlite3") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*), min(phase), max(phase) FROM async_jobs").fetchone() == (
            (4 + 8 + 1) * 25,
            "done",
            "done",
        )


def test_a_child_that_dies_is_reported_by_name_and_code():
    run_local = load_run_local()
    runner = run_local.Runner(dict(os.environ))
    sleeper = runner.start("api", [sys.executable, "-c", "import time; time.sleep(60)"])
    dying = runner.start("worker", [sys.executable, "-c", "import sys; sys.exit(3)"])
    dying.wait(timeout=10)

    try:
        with pytest.raises(run_local.Failed) as failure:
            runner.check_children()
    finally:
        runner.stop_all()

    assert str(failure.value) == f"worker (pid {dying.pid}) exited with code 3; stopping the rest."
    assert sleeper.returncode == -15
    assert runner.children == []


def test_stopping_ends_each_child_and_everything_it_started(tmp_path):
    run_local = load_run_local()
    runner = run_local.Runner(dict(os.environ))
    pid_file = tmp_path / "grandchild.pid"
    spawner = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    parent = runner.start("beat", [sys.executable, "-c", spawner])
    sqs = runner.start("sqs", [sys.executable, "-c", "import time; time.sleep(60)"], log_file=tmp_path / "sqs.log")
    deadline = time.monotonic() + 10
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())

    runner.stop_all()

    # Both ended on the SIGTERM itself (-15), not on the SIGKILL that follows an unanswered one.
    assert (parent.returncode, sqs.returncode) == (-15, -15)
    assert gone(grandchild)
    assert runner.children == []
