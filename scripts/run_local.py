"""Run the whole product in the foreground on embedded defaults: local SQS, API with simulators, worker, beat.

`make run` calls this. It starts the local SQS (moto's server mode) unless something already serves its
port, migrates the SQLite database under var/, bootstraps the queues and the readiness flag, starts the
API, the Celery worker and beat, seeds demo data and prints a token and a walkthrough. Ctrl-C stops
every process it started and exits 0; if one of them dies, it stops the rest and exits non-zero.
"""

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("SERENITY_VAR_DIR") or ROOT / "var")
PYTHON = sys.executable
BIN = Path(PYTHON).parent
STOP_GRACE_SECONDS = 15

# Linux: ask the kernel to SIGTERM each child if this process dies without cleaning up (e.g. SIGKILL),
# so an abrupt end never leaves a worker or the local SQS running. Resolved before any fork.
_prctl: Callable[..., int] | None
try:
    _prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None
PR_SET_PDEATHSIG = 1


def _child_setup():
    os.setsid()  # its own process group: stopped as a group, and the terminal's Ctrl-C goes only to us
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Stop(Exception):
    """Ctrl-C or SIGTERM: stop everything and exit 0."""


class Failed(Exception):
    """A start-up step or a child failed: stop everything and exit non-zero with this message."""


class Runner:
    def __init__(self, env: dict):
        self.env = env
        self.children: list[tuple[str, subprocess.Popen]] = []
        # Re-entrant: a signal can arrive while the main thread is printing, and the stop path prints too.
        self.print_lock = threading.RLock()

    # --- output -----------------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        with self.print_lock:
            print(text, flush=True)

    def _pump(self, name: str, stream) -> None:
        width = max(len("worker"), len(name))
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.print_lock:
                print(f"{name:<{width}} | {line}", flush=True)
        stream.close()

    # --- processes --------------------------------------------------------------------------------
    def start(
        self, name: str, argv: list[str], *, log_file: Path | None = None, env: dict | None = None
    ) -> subprocess.Popen:
        """Start a long-running child in its own process group; its output is prefixed with `name`
        (or goes to `log_file` when it is too chatty for the terminal). `env` adds to the runner's variables."""
        out: IO[bytes] | int = subprocess.PIPE
        if log_file:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            out = log_file.open("wb")
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_child_setup,
        )
        if not isinstance(out, int):  # the log file: the child holds its own copy
            out.close()
        else:
            threading.Thread(target=self._pump, args=(name, proc.stdout), daemon=True).start()
        self.children.append((name, proc))
        self.say(f"started {name} (pid {proc.pid})")
        return proc

    def run_step(self, name: str, argv: list[str], *, capture: bool = False) -> str:
        """Run a start-up step to completion. Raises Failed with its output when it fails."""
        self.say(f"--- {name}")
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if capture else subprocess.STDOUT,
            preexec_fn=_child_setup,
        )
        # Listed while it runs, so Ctrl-C during a step stops the step too.
        self.children.append((name, proc))
        raw, err = proc.communicate()
        self.children.remove((name, proc))
        out = raw.decode("utf-8", "replace")
        if not capture:
            for line in out.splitlines():
                self.say(f"  {line}")
        if proc.returncode != 0:
            detail = (err.decode("utf-8", "replace") if capture and err else out).strip().splitlines()[-5:]
            raise Failed(f"{name} failed (exit {proc.returncode}):\n  " + "\n  ".join(detail))
        return out

    def check_children(self) -> None:
        for name, proc in self.children:
            code = proc.poll()
            if code is not None:
                how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
                raise Failed(f"{name} (pid {proc.pid}) {how}; stopping the rest.")

    def stop_all(self) -> None:
        """Stop the application processes first, then the local SQS, so the worker can still ack what it
        finished. Each gets SIGTERM, then SIGKILL after STOP_GRACE_SECONDS; all by process group."""
        apps = [(n, p) for n, p in self.children if n != "sqs"]
        infra = [(n, p) for n, p in self.children if n == "sqs"]
        for wave in (apps, infra):
            for name, proc in reversed(wave):
                if proc.poll() is None:
                    self.say(f"stopping {name} (pid {proc.pid})")
                    _signal_group(proc, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for name, proc in reversed(wave):
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say(f"{name} (pid {proc.pid}) did not stop within {STOP_GRACE_SECONDS}s; killing it")
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()
        # A group can outlive its leader (a child's own children): make sure nothing of ours remains.
        for _name, proc in self.children:
            _signal_group(proc, signal.SIGKILL)
        self.children.clear()

    def wait_until(self, what: str, ready, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            self.check_children()
            if time.monotonic() > deadline:
                raise Failed(f"{what} did not come up within {timeout:.0f}s.")
            time.sleep(0.2)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the child is its own group leader (setsid), so its pid is the group id
    except ProcessLookupError:
        pass


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (a fixed local URL)
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def local_env() -> dict:
    env = dict(os.environ)
    env.setdefault("SERENITY_ENVIRONMENT", "local")
    env.setdefault("DJANGO_SETTINGS_MODULE", "serenity.settings")
    env.setdefault("PORT", "8000")
    env.setdefault("AWS_ENDPOINT_URL", "http://127.0.0.1:5055")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def seed_demo_data(runner: Runner, manage: list[str]) -> dict | None:
    """The demo organization, brand, site, user and token from `sandbox_seed` (None without simulators)."""
    try:
        out = runner.run_step("seed demo data", [*manage, "sandbox_seed"], capture=True)
    except Failed as failure:
        if "Unknown command" in str(failure):  # SANDBOX_ENABLED=false: no simulators, so no demo data
            runner.say("  sandbox_seed is not available (simulators disabled): no demo data, no walkthrough")
            return None
        raise
    lines = [line for line in out.splitlines() if line.startswith("{")]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise Failed(f"sandbox_seed printed no JSON object: {out.strip()[:200]!r}") from exc


def walkthrough(base: str, seed: dict) -> str:
    org, brand = seed["orgId"], seed["brandId"]
    markets = f"{base}/v2/orgs/{org}/brands/{brand}/serenity/markets"
    body = json.dumps(
        {
            "market": "fr",
            "languageCode": "fr",
            "brandDomain": seed["brandDomain"],
            "brandNames": [seed["brandName"]],
            "generatePrompts": True,
        }
    )
    manage = "SERENITY_ENVIRONMENT=local .venv/bin/python manage.py"
    who = f"--user-id {seed.get('userId')} --org {seed.get('imsOrgId')}"
    return f"""
Serenity is running on {base}  (Ctrl-C stops everything)

Demo data: organization {org} (IMS org {seed.get("imsOrgId")}), brand {brand} ({seed["brandName"]},
{seed["brandDomain"]}), site {seed.get("siteId")}, user {seed.get("userId")}.

The UI signs in once and calls with a SpaceCat session token; when a call reaches Semrush it also sends a
promise token (x-promise-token), which IMS rotates on every use: fetch a fresh one for each such call.

  export SESSION='{seed["sessionToken"]}'
  PROMISE=$({manage} sandbox_token --promise {who})

1. Create a market with prompt generation, with the body the UI sends (x-promise-audience selects the Semrush
   client pair); the answer carries promptGeneration.jobId, kept in $JOB:

  JOB=$(curl -s -X POST {markets} \\
    -H "Authorization: Bearer $SESSION" -H "x-promise-token: $PROMISE" -H 'x-promise-audience: semrush' \\
    -H 'Content-Type: application/json' -d '{body}' \\
    | tee /dev/stderr | python3 -c 'import json, sys; print(json.load(sys.stdin)["promptGeneration"]["jobId"])')

2. Wait for the job's end: each call sends the last answer's ETag and waits up to 20 s, answering as soon as
   the job changes (200) or 304 when nothing did; the first, without an ETag, answers at once:

  ETAG=
  while true; do
    BODY=$(curl -s -D /tmp/serenity-poll-headers "{markets}/generation/jobs/$JOB?wait=20" \\
      -H "Authorization: Bearer $SESSION" -H "If-None-Match: $ETAG")
    [ -n "$BODY" ] && echo "$BODY" && ETAG=$(sed -n 's/^etag: *//Ip' /tmp/serenity-poll-headers | tr -d '\\r')
    case "$BODY" in *'"status":"IN_PROGRESS"'* | '') ;; *) break ;; esac
  done

3. List the brand's markets, as the UI's Markets tab does: the new one is live, with its generation's end
   (promptGeneration: the job id, its status, its error if it failed):

  curl -s {markets} -H "Authorization: Bearer $SESSION"

4. See the prompts the worker wrote to the Semrush simulator:

  curl -s {base}/sandbox/semrush/_state

An IMS user token for the same user works as the bearer too, without x-promise-token:
  export TOKEN='{seed["token"]}'
More tokens: {manage} sandbox_token [--session | --promise] {who}
API docs: {base}/api/docs    Health: {base}/healthz, {base}/readyz
"""


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_stop(signum, _frame):
    raise Stop(signal.Signals(signum).name)


def _ignore_stop_signals():
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the clean-up


def main() -> int:
    env = local_env()
    runner = Runner(env)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stop)

    port = env["PORT"]
    base = f"http://127.0.0.1:{port}"
    manage = [PYTHON, "manage.py"]
    try:
        endpoint = urlsplit(env["AWS_ENDPOINT_URL"])
        sqs_host, sqs_port = endpoint.hostname or "127.0.0.1", endpoint.port or 80
        if port_open(sqs_host, sqs_port):
            runner.say(f"local SQS: something already serves {sqs_host}:{sqs_port}; using it")
        elif sqs_host in ("127.0.0.1", "localhost"):
            runner.start(
                "sqs",
                [PYTHON, str(ROOT / "scripts" / "local_sqs.py"), "-H", "127.0.0.1", "-p", str(sqs_port)],
                log_file=VAR / "log" / "sqs.log",
            )
            runner.wait_until(f"the local SQS on {sqs_host}:{sqs_port}", lambda: port_open(sqs_host, sqs_port), 20)
        else:
            raise Failed(f"AWS_ENDPOINT_URL={env['AWS_ENDPOINT_URL']} does not answer; start it or unset it.")
        if port_open("127.0.0.1", int(port)):
            raise Failed(f"Port {port} is already in use; stop what uses it or run `PORT=8001 make run`.")

        runner.run_step("migrate", [*manage, "migrate", "--noinput"])
        runner.run_step("bootstrap queues", [*manage, "bootstrap_queues", "--local"])

        runner.start("api", [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"])
        queues = ",".join(
            (env.get("MARKET_JOBS_QUEUE", "serenity-market-jobs"), env.get("MAINTENANCE_QUEUE", "serenity-maintenance"))
        )
        runner.start(
            "worker",
            [
                str(BIN / "celery"),
                "-A",
                "serenity",
                "worker",
                "-P",
                "threads",
                "-Q",
                queues,
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
            ],
        )
        runner.start("beat", [str(BIN / "celery"), "-A", "serenity", "beat", "-l", "INFO"])
        runner.wait_until(f"the API on {base}", lambda: http_ok(f"{base}/healthz"), 60)

        # The seed runs once the API is up: the simulators it fills are served by the API.
        seed = seed_demo_data(runner, manage)
        runner.say(walkthrough(base, seed) if seed else f"\nSerenity is running on {base}  (Ctrl-C stops everything)")

        while True:
            runner.check_children()
            time.sleep(0.5)
    except Stop as stop:
        _ignore_stop_signals()
        runner.say(f"\n{stop}: stopping")
        runner.stop_all()
        runner.say("stopped")
        return 0
    except Failed as failure:
        _ignore_stop_signals()
        runner.say(f"\nmake run: {failure}")
        runner.stop_all()
        return 1
    except BaseException:
        _ignore_stop_signals()
        runner.stop_all()
        raise


if __name__ == "__main__":
    sys.exit(main())
