"""The embedded run end to end, exactly as `make run` starts it: its script, SQLite under a temporary var
directory, the API with the simulators, the Celery worker and beat, and a local SQS on a free port. Then the
README walkthrough, three markets through `activate`, and a job re-authorised after NEEDS_REAUTH.

SQLite allows one writer at a time across every process, simulators included: this is where a transaction
held across a network call shows up as a hang (the IMS simulator serving the call cannot write).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60
JOB_TIMEOUT = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedRun:
    """`scripts/run_local.py` in its own process group, its output collected line by line."""

    def __init__(self, var_dir: Path):
        self.var_dir = var_dir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        # Only what a newcomer's shell would have: no DATABASE_URL (SQLite under var/), no test settings.
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(var_dir),
            "LANG": "C.UTF-8",
            "SERENITY_ENVIRONMENT": "local",
            "SERENITY_VAR_DIR": str(var_dir),
            "PORT": str(self.port),
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        }
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "scripts/run_local.py"],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines[-80:])

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while not any("Serenity is running on" in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"make run did not come up:\n{self.output()}")
            time.sleep(0.2)

    def manage(self, *args) -> str:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)  # what Ctrl-C does
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


class Walkthrough:
    """The README walkthrough's calls, with the demo ids and token from `manage.py sandbox_seed`."""

    def __init__(self, run: EmbeddedRun):
        lines = [line for line in run.manage("sandbox_seed").splitlines() if line.startswith("{")]
        seed = json.loads(lines[-1])
        self.run = run
        self.org, self.brand = seed["orgId"], seed["brandId"]
        self.user, self.ims_org = seed["userId"], seed["imsOrgId"]
        # What the original's UI sends about the brand with every market.
        self.brand_fields = {"brandDomain": seed["brandDomain"], "brandNames": [seed["brandName"]]}
        # As the UI calls: a session token, and a fresh promise token for each call that reaches Semrush.
        self.http = httpx.Client(
            base_url=run.base, timeout=30, headers={"Authorization": f"Bearer {seed['sessionToken']}"}
        )
        self.ims_http = httpx.Client(
            base_url=run.base, timeout=30, headers={"Authorization": f"Bearer {seed['token']}"}
        )
        self.markets = f"/v2/orgs/{self.org}/brands/{self.brand}/serenity/markets"

    def promise(self) -> dict:
        token = self.run.manage("sandbox_token", "--promise", "--user-id", self.user, "--org", self.ims_org).strip()
        return {"x-promise-audience": "semrush", "x-promise-token": token}

    def create(self, market: str, language: str, *, with_ims_bearer: bool = False) -> httpx.Response:
        body = {"market": market, "languageCode": language, "generatePrompts": True, **self.brand_fields}
        if with_ims_bearer:  # an IMS user token reaches Semrush itself: no promise token
            return self.ims_http.post(self.markets, json=body, headers={"x-promise-audience": "semrush"})
        return self.http.post(self.markets, json=body, headers=self.promise())

    def activate(self, *slices) -> httpx.Response:
        body = {
            "markets": [{"market": m, "languageCode": lang} for m, lang in slices],
            "generatePrompts": True,
            **self.brand_fields,
        }
        return self.http.post(
            f"/v2/orgs/{self.org}/brands/{self.brand}/serenity/activate", json=body, headers=self.promise()
        )

    def poll_until_done(self, job_id: str) -> dict:
        """The walkthrough's step 2: waiting polls (`?wait=20`, the last answer's ETag in If-None-Match) until the
        job ends. On SQLite nothing notifies: each wait re-reads the job at an interval."""
        deadline = time.monotonic() + JOB_TIMEOUT
        etag = ""
        while True:
            response = self.http.get(
                f"{self.markets}/generation/jobs/{job_id}?wait=20", headers={"If-None-Match": etag} if etag else {}
            )
            assert response.status_code in (200, 304), response.text
            if response.status_code == 200:
                body, etag = response.json(), response.headers["ETag"]
                if body["status"] != "IN_PROGRESS":
                    return body
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still IN_PROGRESS after {JOB_TIMEOUT}s:\n{self.run.output()}")

    def markets_listed(self) -> list[dict]:
        """The walkthrough's step 3: the brand's markets, as the Markets tab lists them."""
        response = self.http.get(self.markets)
        assert response.status_code == 200, response.text
        return response.json()["items"]

    def reauth(self, job_id: str) -> httpx.Response:
        return self.http.post(f"{self.markets}/generation/jobs/{job_id}/reauth", headers=self.promise())

    def semrush_project(self, project_id: str) -> dict:
        state = self.http.get("/sandbox/semrush/_state").json()
        return next(p for p in state["projects"] if p["id"] == project_id)

    def ims(self, action: dict) -> None:
        self.http.post("/sandbox/ims/_control", json=action).raise_for_status()


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory):
    run = EmbeddedRun(tmp_path_factory.mktemp("var"))
    try:
        run.wait_ready()
        yield Walkthrough(run)
    finally:
        code = run.stop()
        assert code == 0, f"make run did not stop cleanly (exit {code}):\n{run.output()}"


def assert_completed_with_prompts(walk: Walkthrough, job: dict) -> dict:
    assert job["status"] == "COMPLETED", job
    project = walk.semrush_project(job["result"]["projectId"])
    assert project["published"] is True
    assert len(project["prompts"]) == job["result"]["promptCount"] == 50
    return project


def test_the_readme_walkthrough_takes_a_market_to_completed_with_its_prompts_published(walkthrough):
    created = walkthrough.create("FR", "fr")
    assert created.status_code == 201, created.text
    handle = created.json()["promptGeneration"]
    assert handle["status"] == "provisioning" and handle["reused"] is False

    job = walkthrough.poll_until_done(handle["jobId"])

    assert job["result"]["verdict"] == "ship"
    assert_completed_with_prompts(walkthrough, job)
    (listed,) = [m for m in walkthrough.markets_listed() if (m["market"], m["languageCode"]) == ("FR", "fr")]
    assert (listed["status"], listed["semrushProjectId"]) == ("live", job["result"]["projectId"])
    assert listed["promptGeneration"] == {"jobId": handle["jobId"], "status": "COMPLETED", "error": None}
    # Removed from the Markets tab, as the UI does: the project goes from Semrush, then the market.
    removed = walkthrough.http.delete(f"{walkthrough.markets}/2250/fr", headers=walkthrough.promise())
    assert removed.status_code == 204, removed.text
    assert [m for m in walkthrough.markets_listed() if m["market"] == "FR"] == []
    state = walkthrough.http.get("/sandbox/semrush/_state").json()
    assert job["result"]["projectId"] not in {p["id"] for p in state["projects"]}
    # Its trace is kept in var/ for the admin's waterfall: the request and the worker's delivery, one trace.
    request, delivery = spans_of(walkthrough, handle["jobId"])
    assert request["traceId"] == delivery["traceId"]
    assert delivery["attributes"]["job.outcome"] == "completed"
    assert (
        walkthrough.http.headers["Authorization"].split()[1]
        not in (walkthrough.run.var_dir / "traces" / "spans.jsonl").read_text()
    )
    # Every line the worker logged about the job names that trace.
    worker_lines = [
        json_or_none(line.split("| ", 1)[1])
        for line in walkthrough.run.lines
        if line.startswith("worker") and "| {" in line
    ]
    about_job = [line for line in worker_lines if line and line.get("job_id") == handle["jobId"]]
    assert about_job and {line.get("trace_id") for line in about_job} == {delivery["traceId"]}


def json_or_none(line: str) -> dict | None:
    """A line of the span file, or None for the last line while a process is still writing it."""
    try:
        return json.loads(line)
    except ValueError:
        return None


def spans_of(walk: Walkthrough, job_id: str) -> tuple[dict, dict]:
    """The entry point's request span and the delivery span of `job_id` in the run's span file (each process
    writes its spans within about a second)."""
    path = walk.run.var_dir / "traces" / "spans.jsonl"
    deadline = time.monotonic() + 20
    while True:
        spans = [
            parsed
            for line in (path.read_text().splitlines() if path.exists() else [])
            if (parsed := json_or_none(line))
        ]
        mine = [s for s in spans if s["attributes"].get("job.id") == job_id]
        requests = [s for s in mine if s["kind"] == "SERVER"]
        deliveries = [s for s in mine if s["kind"] == "CONSUMER"]
        if requests and deliveries:
            return requests[0], deliveries[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no request and delivery spans of {job_id} in {path}")
        time.sleep(0.5)


def test_three_markets_activated_at_once_all_complete(walkthrough):
    answered = walkthrough.activate(("DE", "de"), ("ES", "es"), ("IT", "it"))
    assert answered.status_code == 200, answered.text
    jobs = [entry["body"]["promptGeneration"]["jobId"] for entry in answered.json()["markets"]]

    done = [walkthrough.poll_until_done(job_id) for job_id in jobs]

    assert [job["status"] for job in done] == ["COMPLETED"] * 3
    for job in done:
        assert_completed_with_prompts(walkthrough, job)


def test_a_job_needing_reauth_is_reauthorised_and_completes_under_the_same_id(walkthrough):
    # Created with the IMS bearer, so the one exchange made to fail is the job's own.
    walkthrough.ims({"action": "fail_next_exchanges", "count": 1, "status": 401})
    created = walkthrough.create("NL", "nl", with_ims_bearer=True)
    assert created.status_code == 201, created.text
    job_id = created.json()["promptGeneration"]["jobId"]

    failed = walkthrough.poll_until_done(job_id)
    assert failed["status"] == "FAILED" and failed["error"]["code"] == "NEEDS_REAUTH", failed

    accepted = walkthrough.reauth(job_id)
    assert accepted.status_code == 202, accepted.text
    job = walkthrough.poll_until_done(job_id)

    assert job["jobId"] == job_id
    assert_completed_with_prompts(walkthrough, job)
