"""Migrations safe for a rolling deploy: during a deploy the previous release's workers run on the schema the new
release's release step has just migrated, beside the new API (docs/operations.md, "Migrations").

The previous release is the newest commit, down main's first-parent line, whose set of migrations differs from this
checkout's. Its code (`git archive`) runs as a real worker on the test database, which pytest-django migrated to this
checkout's head, and takes a job the new API created to COMPLETED while the new API serves its waiting poll. A
migration that breaks the release before it (a column it reads dropped or renamed, a NOT NULL column it does not
write) fails here. A checkout without that history (a shallow clone, a source archive) skips it, saying why; CI,
whose clone has the history (.ci/run fetches it when shallow), fails instead. The old code runs on this checkout's
virtualenv, not its own image's: a release that also moves a dependency the previous one cannot run with fails here
too, and then says so in the old worker's log.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db.migrations.loader import MigrationLoader

from jobs.models import AsyncJob, WorkerHeartbeat
from tests.waits import wait_until

ROOT = Path(__file__).resolve().parents[1]
MIGRATION = re.compile(r"(?:^|/)([^/]+)/migrations/(\d{4}_\w+)\.py$")

pytestmark = pytest.mark.worker


def migration_set(paths) -> frozenset[tuple[str, str]]:
    """(app directory, migration name) of every migration among `paths`: what a schema is made of, whatever moved
    the app's directory (the simulators went from serenity/sandbox/ to sandbox/ with their migrations unchanged)."""
    return frozenset(m.groups() for m in map(MIGRATION.search, paths) if m)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def previous_release() -> str:
    """The newest commit of this checkout's first-parent history whose migrations differ from the checkout's own
    (HEAD itself when the work tree adds or removes one). Skips, or fails under CI, without the history."""
    problem = None
    try:
        shallow = git("rev-parse", "--is-shallow-repository").strip() == "true"
        commits = git("rev-list", "--first-parent", "HEAD").split()
    except (OSError, subprocess.CalledProcessError):
        shallow, commits, problem = False, [], "this checkout has no git history to take the previous release from"
    here = migration_set(str(p.relative_to(ROOT)) for p in ROOT.glob("**/migrations/*.py") if ".venv" not in p.parts)
    for commit in commits:
        if migration_set(git("ls-tree", "-r", "--name-only", commit).split()) != here:
            return commit
    if shallow:
        problem = "this clone is shallow and holds no commit with other migrations: git fetch --unshallow"
    if problem and os.environ.get("CI"):
        pytest.fail(f"CI must run the previous release's worker on the new schema: {problem}")
    pytest.skip(problem or "no commit in this history has other migrations: there is no previous schema")


@pytest.fixture
def previous_release_tree(tmp_path) -> Path:
    """The previous release's files, as `git archive` gives them."""
    commit = previous_release()
    tree = tmp_path / f"release-{commit[:12]}"
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def test_the_previous_release_worker_completes_a_job_on_the_new_schema_while_the_new_api_serves_its_poll(
    previous_release_tree, world, async_on, queues, live_server
):
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "PYTHONPATH": str(previous_release_tree),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "WORKER_CONCURRENCY": "4",
        # The same local secrets as the new API's (the key that seals the job's promise token): one environment.
        "SERENITY_VAR_DIR": str(settings.VAR_DIR),
    }
    # The old code, not this checkout's, is what the worker imports.
    imported = subprocess.run(
        [sys.executable, "-c", "import jobs; print(jobs.__file__)"],
        cwd=previous_release_tree,
        env=env,
        text=True,
        capture_output=True,
        check=True,
    ).stdout.strip()
    assert Path(imported).is_relative_to(previous_release_tree)
    log = previous_release_tree / "worker.log"
    with open(log, "wb") as out:
        # The image's `worker` role (docker/serenity-entrypoint), on the previous release's code.
        old_worker = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "serenity", "worker", "-P", "threads",
                "-Q", f"{settings.MARKET_JOBS_QUEUE},{settings.MAINTENANCE_QUEUE}",
                "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "WARNING",
            ],
            cwd=previous_release_tree, env=env, stdout=out, stderr=out,
        )  # fmt: skip
    try:
        response = world.post(
            world.url("markets"),
            {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True},
            **{"x-promise-audience": "semrush"},
        )
        assert response.status_code == 201, response.content
        job_id = response.json()["promptGeneration"]["jobId"]

        body = poll_until_ended(live_server.url, world, job_id)
        assert body["status"] == "COMPLETED", f"{body}\nthe previous release's worker:\n{tail(log)}"
        assert body["result"]["published"] is True and body["result"]["promptCount"] > 0
        job = AsyncJob.objects.get(id=job_id)
        assert (job.status, job.attempts, job.lost_deliveries) == ("COMPLETED", 1, 0)
        # Nothing else consumed the queue: the one worker alive is the previous release's process.
        workers = wait_until(lambda: list(WorkerHeartbeat.objects.values_list("worker", flat=True)), timeout=60)
        assert [w.rsplit(":", 1)[1] for w in workers] == [str(old_worker.pid)]
    finally:
        old_worker.send_signal(signal.SIGTERM)
        stopped = old_worker.wait(timeout=60)
    assert stopped == 0, tail(log)


def tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-40:])


def poll_until_ended(base_url: str, world, job_id: str) -> dict:
    """The new API's waiting poll over HTTP (the live server), with the last ETag, until the job ends."""
    url = f"{world.url('markets/generation/jobs/')}{job_id}?wait=20"
    etag, body = "", None
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for _ in range(6):  # a hang guard: the simulators answer in seconds, each poll waits at most 20 s
            poll = client.get(url, headers={"Authorization": f"Bearer {world.token}", "If-None-Match": etag})
            assert poll.status_code in (200, 304), poll.text
            if poll.status_code == 200:
                body, etag = poll.json(), poll.headers["ETag"]
                if body["status"] != "IN_PROGRESS":
                    return body
    return body


def test_each_migration_the_checker_lets_through_is_one_migration_of_a_checked_app():
    """`make lint`'s migration check names its reviewed exceptions by migration name alone (django-migration-linter's
    `ignore_name`): each must still name exactly one migration of the apps it checks, so an exception neither
    outlives its migration nor lets through a newer one of the same name in another of those apps."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["django_migration_linter"]
    checked = [name for app, name in MigrationLoader(None).disk_migrations if app in options["include_apps"]]
    assert options["ignore_name"], "no exceptions configured"
    for name in options["ignore_name"]:
        assert checked.count(name) == 1, name
