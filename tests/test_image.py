"""The image a deployment runs, proven end to end.

docker/Dockerfile is built with buildah (docker/buildah-build: no Docker daemon, and debian:bookworm-slim made from
Debian's packages, as no image registry is reachable), then every service of docker/compose.yaml is run from it as
compose runs it: its command through the image's entry point, its environment, in the order and on the conditions
of its `depends_on`, each health check as written. The database is PostgreSQL's, one of its own, standing in for
compose's `postgres` service; addresses on compose's network (`sqs:5055`, `api:8000`) become this machine's ports.
`bootstrap`, `api`, `worker` and `beat` run from the image deployments run (`base` requirements), `sqs` from the
`REQUIREMENTS=dev` build compose makes. Then the README walkthrough (sandbox_seed, createMarket with
generatePrompts, the waiting poll) reaches COMPLETED through the image's API and worker, and every service stops on
SIGTERM as a deploy stops it.

Skipped, saying why, where buildah cannot run here (not installed, or not root: the build and the runs use chroot
isolation); CI installs it (.ci/run), and with `CI` set a missing buildah fails instead.
"""

from __future__ import annotations

import graphlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import jsonschema
import psycopg
import pytest
import yaml
from django.conf import settings

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "compose.yaml"
COMPOSE_SPEC = ROOT / "tests" / "contracts" / "compose-spec.json"
# Where compose's services find each other on its network; each is replaced by this machine's address for it.
COMPOSE_DATABASE_URL = "postgres://serenity:serenity@postgres:5432/serenity"
COMPOSE_SQS, COMPOSE_API = "sqs:5055", "api:8000"
# The one service of compose.yaml that needs the dev requirements (moto); the others run the deployable image.
DEV_SERVICES = {"sqs"}
# Hang guards only: how long a process may take to do what it is expected to do at all.
START_GUARD_SECONDS = 180
STOP_GUARD_SECONDS = 60


def test_the_compose_file_follows_the_compose_specification():
    """What `docker compose config` checks first: the file against the Compose Specification's own JSON Schema
    (tests/contracts/compose-spec.json, compose-spec/compose-spec's schema/compose-spec.json)."""
    schema = json.loads(COMPOSE_SPEC.read_text())
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load(COMPOSE.read_text()))


def buildah_or_skip() -> None:
    """Nothing where buildah can run here; else a skip saying what is missing (a failure in CI, which installs it)."""
    missing = None
    if shutil.which("buildah") is None or shutil.which("debootstrap") is None:
        missing = "the image test builds with Debian's buildah and debootstrap: apt-get install buildah debootstrap"
    elif os.geteuid() != 0:
        missing = "the image test runs buildah with chroot isolation, which needs root"
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must build and run the image: {missing}")
    if missing:
        pytest.skip(missing)


@pytest.mark.image
@pytest.mark.timeout(1800)  # a cold build: the Debian base, then both requirement sets from PyPI
def test_the_image_runs_every_compose_service_and_takes_the_walkthrough_to_completed(tmp_path):
    buildah_or_skip()
    compose = yaml.safe_load(COMPOSE.read_text())
    services = {name: spec for name, spec in compose["services"].items() if "build" in spec}
    assert set(compose["services"]) - set(services) == {"postgres"}, "a service compose runs that CI does not"
    # One build for every service, of the file and context docker/buildah-build builds; its arguments make `dev`.
    (compose_build,) = {json.dumps(spec["build"], sort_keys=True) for spec in services.values()}
    compose_build = json.loads(compose_build)
    assert (compose_build["context"], compose_build["dockerfile"]) == ("..", "docker/Dockerfile"), compose_build
    tag = f"localhost/serenity-test:{settings.DATABASES['default']['TEST']['NAME']}"
    images = {
        "base": build(f"{tag}-base", tmp_path),
        "dev": build(f"{tag}-dev", tmp_path, *(f"{key}={value}" for key, value in compose_build["args"].items())),
    }

    with Stack(tmp_path, services, images) as stack:
        # The `sqs` role names the build it needs when the image lacks moto.
        refused = stack.run_once(images["base"], ["serenity", "sqs"])
        assert refused.returncode == 2
        assert "the sqs role needs an image built with --build-arg REQUIREMENTS=dev" in refused.stderr

        stack.up()
        assert stack.ended_successfully == {"bootstrap"}  # the release step ran to its end; the rest keep running
        seed = json.loads(stack.exec("api", ["python", "manage.py", "sandbox_seed"]))
        promise = stack.exec(
            "api",
            [
                "python",
                "manage.py",
                "sandbox_token",
                "--promise",
                "--user-id",
                seed["userId"],
                "--org",
                seed["imsOrgId"],
            ],
        ).strip()
        job = walkthrough(stack.api_url, seed, promise)
        assert job["status"] == "COMPLETED", (job, stack.logs("worker"))
        assert job["result"]["published"] is True
        semrush = httpx.get(f"{stack.api_url}/sandbox/semrush/_state", timeout=30).json()
        (project,) = [p for p in semrush["projects"] if p["id"] == job["result"]["projectId"]]
        assert project["published"] is True
        assert len(project["prompts"]) == job["result"]["promptCount"] > 0

        # A deploy's stop: SIGTERM, and each process ends cleanly (the local SQS, moto's development server, has no
        # graceful stop of its own).
        statuses = stack.down()
        assert {name: statuses[name] for name in ("api", "worker", "beat")} == {"api": 0, "worker": 0, "beat": 0}


def build(tag: str, tmp_path: Path, *build_args: str) -> str:
    """`docker/buildah-build -t tag [--build-arg …]`; its output in the test's directory, shown when it fails."""
    log = tmp_path / f"build-{tag.rsplit(':', 1)[-1]}.log"
    args = [a for arg in build_args for a in ("--build-arg", arg)]
    with open(log, "wb") as out:
        done = subprocess.run([str(ROOT / "docker" / "buildah-build"), "-t", tag, *args], stdout=out, stderr=out)
    assert done.returncode == 0, f"docker/buildah-build {' '.join(args)} failed:\n{tail(log)}"
    return tag


def walkthrough(api_url: str, seed: dict, promise: str) -> dict:
    """The README's walkthrough: createMarket with generatePrompts, then the waiting poll with the last ETag until
    the job ends. Returns the job's last body (IN_PROGRESS still if it never ended)."""
    org_brand = f"{api_url}/v2/orgs/{seed['orgId']}/brands/{seed['brandId']}"
    session = {"Authorization": f"Bearer {seed['sessionToken']}"}
    with httpx.Client(timeout=60) as client:
        created = client.post(
            f"{org_brand}/serenity/markets",
            headers={**session, "x-promise-token": promise, "x-promise-audience": "semrush"},
            json={
                "market": "fr",
                "languageCode": "fr",
                "brandDomain": seed["brandDomain"],
                "brandNames": ["Sandbox Coffee"],
                "generatePrompts": True,
            },
        )
        assert created.status_code == 201, created.text
        handle = created.json()["promptGeneration"]
        assert handle["status"] == "provisioning" and handle["reused"] is False
        etag, body = "", None
        for _ in range(6):  # a hang guard: the simulators answer in seconds, each poll waits at most 20 s
            poll = client.get(
                f"{org_brand}/serenity/markets/generation/jobs/{handle['jobId']}?wait=20",
                headers={**session, "If-None-Match": etag},
            )
            assert poll.status_code in (200, 304), poll.text
            if poll.status_code == 200:
                body, etag = poll.json(), poll.headers["ETag"]
                if body["status"] != "IN_PROGRESS":
                    break
        return body


@dataclass
class Running:
    """One compose service: its working container, its process (`buildah run`), its output file."""

    name: str
    spec: dict
    container: str
    env: dict[str, str]
    log: Path
    process: subprocess.Popen | None = None
    healthy: bool = False


@dataclass
class Stack:
    """compose.yaml's services run from the image with buildah, each in a working container of its own sharing one
    `var` directory (compose's `var` volume: the local secrets every process must agree on)."""

    tmp_path: Path
    services: dict[str, dict]
    images: dict[str, str]
    api_port: int = field(default_factory=free_port)
    sqs_port: int = field(default_factory=free_port)
    running: dict[str, Running] = field(default_factory=dict)
    containers: list[str] = field(default_factory=list)
    ended_successfully: set[str] = field(default_factory=set)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def __enter__(self) -> Stack:
        db = settings.DATABASES["default"]
        self.database = f"{db['TEST']['NAME']}_image"
        server = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}"
        self.maintenance_url, self.database_url = f"{server}/postgres", f"{server}/{self.database}"
        with psycopg.connect(self.maintenance_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.database}"')
        self.var = self.tmp_path / "var"
        self.var.mkdir()
        uid = self.run_once(self.images["base"], ["id", "-u"]).stdout.strip()
        os.chown(self.var, int(uid), int(uid))
        return self

    def __exit__(self, *exc) -> None:
        for service in self.running.values():
            if service.process and service.process.poll() is None:
                os.killpg(service.process.pid, signal.SIGKILL)
                service.process.wait()
        for container in self.containers:
            subprocess.run(["buildah", "rm", container], capture_output=True)
        with psycopg.connect(self.maintenance_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')

    def container(self, image: str) -> str:
        made = subprocess.run(["buildah", "from", "--pull=never", image], capture_output=True, text=True, check=True)
        self.containers.append(made.stdout.strip())
        return self.containers[-1]

    def run_once(self, image: str, argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["buildah", "run", "--isolation", "chroot", self.container(image), "--", *argv],
            capture_output=True,
            text=True,
        )

    def environment(self, spec: dict) -> dict[str, str]:
        """The service's compose environment with compose's addresses replaced by this machine's; PORT and SQS_PORT
        name the ports the API and the local SQS listen on (8000 and 5055 by default, inside compose)."""
        env = {}
        for key, value in spec["environment"].items():
            value = str(value).replace(COMPOSE_DATABASE_URL, self.database_url)
            value = value.replace(COMPOSE_SQS, f"127.0.0.1:{self.sqs_port}").replace(COMPOSE_API, self.api_url[7:])
            assert not any(host in value for host in ("@postgres:", "//sqs:", "//api:")), f"{key}={value}"
            env[key] = value
        return {**env, "PORT": str(self.api_port), "SQS_PORT": str(self.sqs_port)}

    def command(self, name: str, argv: list[str]) -> list[str]:
        """`buildah run` of argv in the service's container, with its environment and volumes."""
        service = self.running[name]
        volumes = [f"{self.var}:/app/var"] if service.spec.get("volumes", ["var:/app/var"]) else []
        assert service.spec.get("volumes", ["var:/app/var"]) in (["var:/app/var"], []), service.spec["volumes"]
        return [
            "buildah",
            "run",
            "--isolation",
            "chroot",
            "--network",
            "host",
            *[f for key, value in service.env.items() for f in ("-e", f"{key}={value}")],
            *[f for volume in volumes for f in ("-v", volume)],
            service.container,
            "--",
            *argv,
        ]

    def up(self) -> None:
        """Start every service in compose's order, each once its dependencies meet their conditions, as
        `docker compose up` does; then wait until every service with a health check is healthy."""
        graph = {name: set(spec.get("depends_on", {})) - {"postgres"} for name, spec in self.services.items()}
        for name in graphlib.TopologicalSorter(graph).static_order():
            spec = self.services[name]
            for dependency, wanted in spec.get("depends_on", {}).items():
                condition = wanted["condition"]
                if dependency == "postgres":
                    continue  # its database is made before anything starts
                if condition == "service_healthy":
                    self.wait_healthy(dependency)
                elif condition == "service_completed_successfully":
                    self.wait_completed(dependency)
                else:
                    assert condition == "service_started", condition
            self.start(name, spec)
        for name, spec in self.services.items():
            if spec.get("restart") == "no":
                self.wait_completed(name)
            else:
                if "healthcheck" in spec:
                    self.wait_healthy(name)
                assert self.running[name].process.poll() is None, f"{name} stopped:\n{self.logs(name)}"

    def start(self, name: str, spec: dict) -> None:
        image = self.images["dev" if name in DEV_SERVICES else "base"]
        inspected = subprocess.run(["buildah", "inspect", "--type", "image", image], capture_output=True, check=True)
        entrypoint = json.loads(inspected.stdout)["OCIv1"]["config"]["Entrypoint"]
        service = Running(name, spec, self.container(image), self.environment(spec), self.tmp_path / f"{name}.log")
        self.running[name] = service
        with open(service.log, "wb") as out:
            service.process = subprocess.Popen(
                self.command(name, [*entrypoint, *spec["command"]]),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def exec(self, name: str, argv: list[str]) -> str:
        """`docker compose exec <service> argv`: its standard output; fails showing the output if it fails."""
        done = subprocess.run(self.command(name, argv), capture_output=True, text=True, timeout=START_GUARD_SECONDS)
        assert done.returncode == 0, f"{name}: {' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        return done.stdout

    def wait_healthy(self, name: str) -> None:
        service = self.running[name]
        if service.healthy:
            return
        test = service.spec["healthcheck"]["test"]
        argv = test[1:] if test[0] == "CMD" else ["sh", "-c", test[1]]
        assert test[0] in ("CMD", "CMD-SHELL"), test
        deadline = time.monotonic() + START_GUARD_SECONDS
        while subprocess.run(self.command(name, argv), capture_output=True).returncode != 0:
            assert service.process.poll() is None, f"{name} exited {service.process.returncode}:\n{self.logs(name)}"
            assert time.monotonic() < deadline, f"{name} never healthy:\n{self.logs(name)}"
            time.sleep(1)
        service.healthy = True

    def wait_completed(self, name: str) -> None:
        process = self.running[name].process
        assert process.wait(timeout=START_GUARD_SECONDS) == 0, f"{name} exited {process.returncode}:\n{self.logs(name)}"
        self.ended_successfully.add(name)

    def down(self) -> dict[str, int]:
        """Stop the services in the reverse of their start, each with SIGTERM to its process (the container's
        first process, where Docker sends it); returns each one's exit status."""
        statuses = {}
        for name in reversed(list(self.running)):
            process = self.running[name].process
            if name in self.ended_successfully:
                continue
            os.kill(role_process(process.pid), signal.SIGTERM)
            statuses[name] = process.wait(timeout=STOP_GUARD_SECONDS)
        return statuses

    def logs(self, name: str) -> str:
        return tail(self.running[name].log)


def role_process(buildah_pid: int) -> int:
    """The process `buildah run` started in the container: under chroot isolation, the child of
    buildah-chroot-exec (buildah itself answers a signal by killing it, as `docker kill` would)."""

    def children(pid: int) -> list[int]:
        # Each thread lists the children it forked, and Go's runtime forks from any of its threads.
        return [int(child) for task in Path(f"/proc/{pid}/task").glob("*") for child in task_children(task)]

    def task_children(task: Path) -> list[str]:
        try:
            return (task / "children").read_text().split()
        except FileNotFoundError:
            return []

    todo = [buildah_pid]
    while todo:
        pid = todo.pop()
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == b"buildah-chroot-exec":
            (role,) = children(pid)
            return role
        todo.extend(children(pid))
    raise AssertionError(f"no container process under buildah {buildah_pid}")


def tail(path: Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no output)"
