"""`make soak`: run a few hundred generations through the product while every kind of fault overlaps, then check
the guarantees of SPEC §5, §10 and §11 from the database and the simulators' own records.

The product runs as production runs it (scripts/stack.py): PostgreSQL, the API under gunicorn, the local SQS,
two Celery worker processes, beat, and the simulators in their own gunicorn server. For SOAK_MINUTES a
seeded schedule injects faults (see FAULT_KINDS) while SOAK_JOBS generations are created, activated,
regenerated and re-authorised over the API. Then the faults stop, the jobs settle, and every invariant is
counted (see `check`). The same seed gives the same schedule of faults and flows; the interleaving with the
processes' own timing differs from run to run, which is the point of a soak.

Environment: SOAK_SEED (default 26), SOAK_JOBS (300), SOAK_MINUTES (10), SOAK_FAULT_EVERY (seconds between
two faults, 3), SOAK_DATABASE_URL (default `soak_serenity` next to the test database), SOAK_FIRST_PORT (use
consecutive ports from there instead of free ones), SOAK_FAULTS (a comma-separated subset of FAULT_KINDS;
default all), SOAK_VISIBILITY (the queue's visibility timeout, 60 s: long enough that a delivery which waits it
stands out), SOAK_BASELINE (1: first run the same seed without faults, for each generation's added latency).
Exit code: 0 when every invariant holds, 1 when one is broken (it is named), 2 when the stack
could not run. The report goes to docs/soak.md (`--no-report` skips it); `--json PATH` also writes the result
as JSON (tests/test_soak.py reads it).

Faults are injected only from outside the product: the simulators' switches (serenity/sandbox/), signals to
processes, PostgreSQL's pg_terminate_backend and messages sent to or held in the queue.
"""

import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts import stack as stacks

ROOT = stacks.ROOT
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/soak_serenity"

# Short, still nested, timeouts (visibility > lease > task limit > DRS + Semrush writes): the soak is about what
# happens, not about waiting for it. The visibility timeout is the exception (SOAK_VISIBILITY, 60 s by default):
# a receive that waits it out, the cost the healing invariants count, must stand out from every other wait.
TIMEOUTS = {
    "JOB_LEASE_TTL_SECONDS": 9,
    "JOB_TASK_TIME_LIMIT_SECONDS": 8,
    "DRS_TIMEOUT_SECONDS": 3,
    "SEMRUSH_WRITE_BUDGET_SECONDS": 4,
    "SEMRUSH_TIMEOUT_SECONDS": 2,
    "IMS_TIMEOUT_SECONDS": 2,
    "JOB_RETRY_BASE_SECONDS": 1,
    "JOB_RETRY_MAX_SECONDS": 4,
    "JOB_MAX_ATTEMPTS": 8,
    "MARKET_JOBS_MAX_RECEIVE_COUNT": 16,
    "SWEEP_EVERY_SECONDS": 5,
    "PROBE_EVERY_SECONDS": 15,
}
ENV = {
    **{k: str(v) for k, v in TIMEOUTS.items()},
    "SERENITY_ASYNC_PROMPT_GEN": "true",
    "LOG_LEVEL": "INFO",
    # The soak is about faults, not abuse limits: every generation has its own user and organization anyway.
    "THROTTLE_ONBOARDING_RATE": "100000/min",
    "THROTTLE_ORG_MARKETS_RATE": "100000/hour",
    "THROTTLE_REAUTH_RATE": "100000/min",
    "THROTTLE_ORG_REAUTH_RATE": "100000/hour",
    # Nor about Semrush's rate: the fleet's budget is on, each call taking its slot, but out of the soak's reach.
    "SEMRUSH_MAX_CALLS_PER_SECOND": "100000",
}
DRS_SLOW_MS, DRS_TIMEOUT_MS, SEMRUSH_STALL_MS = 1500, 4500, 3000
# The throttling fault: for THROTTLE_SECONDS the DRS simulator admits this many concurrent invocations (Lambda's
# TooManyRequestsException above) and the Semrush simulator this many requests per second per client pair (429 and
# Retry-After above). A throttled call spends no attempt (docs/worker.md "Throttled calls").
THROTTLE_SECONDS, THROTTLE_DRS_CONCURRENCY, THROTTLE_SEMRUSH_PER_SECOND = 8, 1, 2
# The events that start a run of a job: its attempts and throttles count from zero again.
RUN_STARTS = frozenset({"created", "replaced", "reauthorized", "rerun"})
WORKERS = ("worker-1", "worker-2")
WORKER_THREADS = 4
MAX_REAUTHS = 3
SETTLE_SECONDS = 240
READYZ_EVERY = 0.5
READYZ_TIMEOUT = 10  # a slow answer on a loaded machine is still an answer
SIMULATORS_APP_NAME = "serenity-simulators"
RESTART_MARGIN = 2.0
JWT = re.compile(rb"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+")

# Faults the schedule picks from, with their weights. Per-generation DRS faults are armed for one brand's
# next call when its generation starts (so each DRS call is known to be slow, to time out or to fail).
FAULT_KINDS = {
    "worker SIGKILL": 3,
    "worker SIGTERM": 2,
    "PostgreSQL backends terminated": 3,
    "database failover with warm pools": 2,
    "rolling deploy": 1,
    "SQS duplicates": 3,
    "SQS delay": 2,
    "Semrush 5xx": 2,
    "Semrush 429": 2,
    "Semrush timeout": 2,
    "Semrush write answer lost": 3,
    "IMS 5xx": 2,
    "IMS exchange answer lost": 2,
    "IMS refusal (re-authorisation needed)": 1,
    "API SIGKILL mid-request": 1,
    "API restart (SIGTERM)": 1,
    "throttling (DRS and Semrush)": 1,
}
DRS_FAULTS = {"DRS slow": 0.08, "DRS timeout": 0.06, "DRS failure (5xx)": 0.06}
FAILOVERS_IN_A_ROW = 3
SLOW_FAULTS = frozenset({"rolling deploy"})  # last in the first round: it holds the schedule for tens of seconds
EARLY_FAULTS = frozenset({"IMS refusal (re-authorisation needed)"})  # first in the first round
EXCHANGE_SWITCH_WAIT = 20  # seconds an exchange fault waits for the one armed before it to be met
# A delivery the database failed before its claim hands its message back within this of the fault.
HAND_BACK_AFTER_DATABASE_FAULT = 15
RECENT_RECEIVE_SECONDS = 5  # a receipt this recent may still be acted on when the soak reads the ledger
POLL_EVERY = 2  # a generation waiting for its job polls it over the API, as the UI does
# API answers a dependency explains: the product names the upstream service that did not answer.
UPSTREAM_CODES = frozenset({"upstream_unavailable", "semrush_unavailable"})


@dataclass
class Generation:
    """One generation the soak drives: its own organization, user, brand and market."""

    index: int
    flow: str  # "create" or "activate"
    drs_fault: str | None
    regenerate: bool
    start_at: float
    country: str
    org: str = ""
    brand: str = ""
    brand_name: str = ""
    domain: str = ""
    user: str = ""
    token: str = ""
    job: str | None = None
    market: str | None = None
    reauths: int = 0
    regenerated: int = 0
    recovered: int = 0
    began: float | None = None  # monotonic: its first request
    first_end: float | None = None  # monotonic: its job first seen ended
    first_status: str = ""  # how its job first ended
    outcome: str = "not started"
    notes: list[str] = field(default_factory=list)


@dataclass
class Config:
    seed: int
    jobs: int
    minutes: float
    fault_every: float
    database_url: str
    first_port: int | None = None
    kinds: tuple[str, ...] = tuple(FAULT_KINDS)  # () for the fault-free baseline
    visibility: int = 60
    baseline: bool = True

    @classmethod
    def from_env(cls) -> "Config":
        first = os.environ.get("SOAK_FIRST_PORT")
        kinds = tuple(k.strip() for k in os.environ.get("SOAK_FAULTS", "").split(",") if k.strip())
        unknown = [k for k in kinds if k not in FAULT_KINDS]
        if unknown:
            raise SystemExit(f"SOAK_FAULTS: unknown kinds {unknown}; known: {', '.join(FAULT_KINDS)}")
        return cls(
            seed=int(os.environ.get("SOAK_SEED", "26")),
            jobs=int(os.environ.get("SOAK_JOBS", "300")),
            minutes=float(os.environ.get("SOAK_MINUTES", "10")),
            fault_every=float(os.environ.get("SOAK_FAULT_EVERY", "3")),
            database_url=os.environ.get("SOAK_DATABASE_URL", DEFAULT_DATABASE_URL),
            first_port=int(first) if first else None,
            kinds=kinds or tuple(FAULT_KINDS),
            visibility=int(os.environ.get("SOAK_VISIBILITY", "60")),
            baseline=os.environ.get("SOAK_BASELINE", "1") not in ("0", "false", ""),
        )


@dataclass
class Invariant:
    name: str
    count: int
    bound: str
    holds: bool
    detail: str = ""


@dataclass
class Result:
    config: Config
    started: datetime
    seconds: float
    faults: Counter
    outcomes: Counter
    flows: Counter
    invariants: list[Invariant]
    explained: list[str]
    latencies: dict[int, float] = field(default_factory=dict)  # generation index -> seconds to its first end
    added: dict[str, float] | None = None  # against the fault-free baseline: median, p95, generations

    @property
    def broken(self) -> list[Invariant]:
        return [i for i in self.invariants if not i.holds]


class Soak:
    def __init__(self, config: Config, *, out=None, ports: dict[str, int] | None = None):
        self.config, self.say = config, out or say
        self.rng = random.Random(config.seed)
        self.stack = stacks.Stack(
            database_url=config.database_url,
            names=("sqs", "sim", "api"),
            env={**ENV, "QUEUE_VISIBILITY_TIMEOUT_SECONDS": str(config.visibility)},
            settings_module="serenity.settings",
            prefix="serenity-soak-",
            first_port=config.first_port,
            ports=ports,
        )
        self.t0 = time.monotonic()
        self.stop_faults = threading.Event()
        self.lock = threading.RLock()
        self.faults: Counter = Counter()
        self.fault_log: list[tuple[float, str, str]] = []  # (wall time, kind, detail)
        self.worker_stops: list[tuple[float, str]] = []  # (wall time, signal): in-flight work was cut off
        self.api_down: list[list[float]] = []  # [from, to] windows of the API's own restarts
        self.readyz_failures: list[tuple[float, str]] = []
        self.server_errors: list[tuple[float, int, str, str]] = []  # (wall time, status, problem code, path)
        self.database_faults: list[float] = []  # wall times of terminated backends
        self.harness_receipts: set[str] = set()  # the soak's own receives (SQS delay): not the product's
        self.throttling: threading.Timer | None = None  # turns the latest throttling fault off
        self.incarnations: Counter = Counter()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.generations: list[Generation] = []
        self.starts: queue.Queue = queue.Queue()

    def on_main_thread(self, start) -> None:
        """Run `start` on the main thread and wait for it. Children die with the thread that started them
        (PR_SET_PDEATHSIG, scripts/run_local.py), so a restart must not happen on a thread that ends first."""
        done = threading.Event()
        self.starts.put((start, done))
        done.wait()

    def run_pending_starts(self) -> None:
        while True:
            try:
                start, done = self.starts.get_nowait()
            except queue.Empty:
                return
            try:
                start()
            finally:
                done.set()

    # --- processes ------------------------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        s = self.stack
        s.start_infrastructure(sqs_ledger=self.ledger_path)
        s.gunicorn(
            "simulators",
            "sim",
            access_log=s.var / "sim-access.log",
            GUNICORN_THREADS="12",
            PGAPPNAME=SIMULATORS_APP_NAME,
        )
        self.start_api()
        for name in WORKERS:
            self.start_worker(name)
        s.beat()
        s.setup_django()

    @property
    def ledger_path(self) -> Path:
        return self.stack.var / "sqs-ledger.jsonl"

    def _log(self, name: str) -> Path:
        self.incarnations[name] += 1
        return self.stack.var / f"{name}.{self.incarnations[name]}.log"

    def start_api(self, wait: bool = True) -> None:
        self.procs["api"] = self.stack.gunicorn(
            "api",
            "api",
            access_log=self.stack.var / "api-access.log",
            log_file=self._log("api"),
            wait=wait,
            WEB_CONCURRENCY="2",
            GUNICORN_THREADS="6",
        )

    def start_worker(self, name: str) -> None:
        queues = ",".join(
            (
                os.environ.get("MARKET_JOBS_QUEUE", "serenity-market-jobs"),
                os.environ.get("MAINTENANCE_QUEUE", "serenity-maintenance"),
            )
        )
        self.procs[name] = self.stack.worker(
            name, queues=queues, threads=WORKER_THREADS, log_file=self._log(name), level="INFO"
        )

    def _forget(self, name: str) -> None:
        proc = self.procs[name]
        self.stack.runner.children = [(n, p) for n, p in self.stack.runner.children if p is not proc]

    def _signal(self, name: str, sig: int, grace: float = 20) -> None:
        proc = self.procs[name]
        self._forget(name)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except Exception:  # a SIGTERM that did not end it in time: end it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    # --- faults ---------------------------------------------------------------------------------------
    def record_fault(self, kind: str, detail: str = "") -> None:
        with self.lock:
            self.faults[kind] += 1
            self.fault_log.append((time.time(), kind, detail))
        self.say(f"  {self.now():5.1f} s: {kind}" + (f" ({detail})" if detail else ""))

    def schedule(self) -> list[str]:
        """Every kind once first (in a seeded order, but a refusal, which only a job still to start can meet,
        first and a rolling deploy, which takes tens of seconds, last), then weighted draws: a short run still
        sees them all."""
        kinds = list(self.config.kinds)
        if not kinds:
            return []
        self.rng.shuffle(kinds)
        kinds.sort(key=lambda kind: (kind not in EARLY_FAULTS) + (kind in SLOW_FAULTS))
        count = max(len(kinds), int(self.config.minutes * 60 / self.config.fault_every))
        weights = [FAULT_KINDS[k] for k in self.config.kinds]
        return kinds + self.rng.choices(list(self.config.kinds), weights=weights, k=count - len(kinds))

    def inject_faults(self, kinds: list[str], rng: random.Random) -> None:
        """Inject `kinds` in order. The first round (each kind once) is always completed, even past the fault
        window on a slow machine, so that every kind is seen; the rest stops with the window."""
        for index, kind in enumerate(kinds):
            pause = self.config.fault_every * rng.uniform(0.5, 1.5)
            if index < len(self.config.kinds):
                time.sleep(pause)
            elif self.stop_faults.wait(pause):
                return
            try:
                self.inject(kind, rng)
            except Exception as exc:  # the harness keeps going; the invariants will tell
                self.say(f"  fault {kind!r} could not be injected: {exc!r}")

    def inject(self, kind: str, rng: random.Random) -> None:
        from jobs.clients import sqs
        from serenity.sandbox.ims import controls as ims
        from serenity.sandbox.semrush import controls as semrush

        if kind in ("worker SIGKILL", "worker SIGTERM"):
            name = rng.choice(WORKERS)
            kill = kind == "worker SIGKILL"
            with self.lock:
                self.worker_stops.append((time.time(), "SIGKILL" if kill else "SIGTERM"))
            self._signal(name, signal.SIGKILL if kill else signal.SIGTERM)
            self.record_fault(kind, name)
            time.sleep(rng.uniform(0.5, 3))
            self.on_main_thread(lambda: self.start_worker(name))
        elif kind == "PostgreSQL backends terminated":
            self.record_fault(kind, f"{self.terminate_backends(rng)} backends")
        elif kind == "database failover with warm pools":
            counts = []
            for _ in range(FAILOVERS_IN_A_ROW):
                counts.append(self.terminate_backends(rng, share=1.0))
                time.sleep(1.0)
            self.record_fault(kind, " + ".join(map(str, counts)) + " backends")
        elif kind == "rolling deploy":
            self.rolling_deploy()
            self.record_fault(kind)
        elif kind == "SQS duplicates":
            from jobs.models import AsyncJob, JobStatus
            from jobs.services import job_publish

            live = list(AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).values_list("id", "job_type")[:50])
            if live:
                job_id, job_type = rng.choice(live)
                copies = rng.randint(2, 5)
                for _ in range(copies):
                    job_publish(job_id, job_type, delay=rng.choice((0, 0, 2, 5)))
                self.record_fault(kind, f"{copies} copies")
        elif kind == "SQS delay":
            from django.conf import settings

            url = sqs.client().get_queue_url(QueueName=settings.MARKET_JOBS_QUEUE)["QueueUrl"]
            held = sqs.receive(url, max_messages=rng.randint(1, 3), visibility=rng.randint(3, 8))
            with self.lock:
                self.harness_receipts.update(m["ReceiptHandle"] for m in held)
            self.record_fault(kind, f"{len(held)} messages held")
        elif kind == "Semrush 5xx":
            semrush.fail_next(
                rng.randint(1, 3),
                status=rng.choice((500, 502, 503)),
                path=rng.choice(("/prompts", "/tags", "/ai-projects", None)),
            )
            self.record_fault(kind)
        elif kind == "Semrush 429":
            semrush.fail_next(rng.randint(1, 2), status=429, path=rng.choice(("/prompts", None)))
            self.record_fault(kind)
        elif kind == "Semrush timeout":
            semrush.fail_next(1, path="/prompts", method=rng.choice(("GET", "POST")), stall_ms=SEMRUSH_STALL_MS)
            self.record_fault(kind)
        elif kind == "Semrush write answer lost":
            semrush.fail_next(1, status=rng.choice((500, 502, 504)), path="/prompts", method="POST", lose_answer=True)
            self.record_fault(kind)
        elif kind == "IMS 5xx":
            self.wait_exchange_switch_free()
            ims.fail_next_exchanges(1, status=rng.choice((500, 503)))
            self.record_fault(kind)
        elif kind == "IMS exchange answer lost":
            self.wait_exchange_switch_free()
            ims.lose_next_exchange_answers(1, status=500)
            self.record_fault(kind)
        elif kind == "IMS refusal (re-authorisation needed)":
            self.wait_exchange_switch_free()
            ims.fail_next_exchanges(1, status=401)
            self.record_fault(kind)
        elif kind in ("API SIGKILL mid-request", "API restart (SIGTERM)"):
            down = time.monotonic()
            with self.lock:
                self.api_down.append([down, float("inf")])
            self._signal("api", signal.SIGKILL if "SIGKILL" in kind else signal.SIGTERM)
            self.record_fault(kind)
            self.on_main_thread(self.start_api)
            with self.lock:
                self.api_down[-1][1] = time.monotonic()
        elif kind == "throttling (DRS and Semrush)":
            self.throttle()
            self.record_fault(
                kind,
                f"{THROTTLE_SECONDS} s: DRS concurrency {THROTTLE_DRS_CONCURRENCY}, "
                f"Semrush {THROTTLE_SEMRUSH_PER_SECOND}/s per pair",
            )

    def throttle(self) -> None:
        """The simulators' limits on for THROTTLE_SECONDS, then off (by a timer, so the schedule goes on and other
        faults overlap the window). A second throttling fault within the window extends it: only the latest
        timer turns the limits off (under the lock, so an earlier timer never turns off a window just opened)."""
        from serenity.sandbox.drs import controls as drs
        from serenity.sandbox.semrush import controls as semrush

        timer = threading.Timer(THROTTLE_SECONDS, self.throttling_off)
        timer.daemon = True
        with self.lock:
            if self.throttling is not None:
                self.throttling.cancel()
            drs.set_concurrency_limit(THROTTLE_DRS_CONCURRENCY)
            semrush.set_rate_limit(THROTTLE_SEMRUSH_PER_SECOND, per_seconds=1)
            self.throttling = timer
            timer.start()

    def throttling_off(self) -> None:
        from django.db import connection

        from serenity.sandbox.drs import controls as drs
        from serenity.sandbox.semrush import controls as semrush

        try:
            with self.lock:
                if self.throttling is not threading.current_thread():
                    return  # a later throttling fault owns the window now, or the faults were quiesced
                self.throttling = None
                drs.set_concurrency_limit(None)
                semrush.set_rate_limit(None)
        finally:
            connection.close()

    def faults_near(self, at: float, seconds: float = 10) -> str:
        """The faults injected within `seconds` of the wall time `at`, for the detail of a broken invariant."""
        with self.lock:
            near = [
                f"{kind} ({t - at:+.1f} s{', ' + detail if detail else ''})"
                for t, kind, detail in self.fault_log
                if abs(t - at) <= seconds
            ]
        return "; ".join(near) or "none"

    def wait_exchange_switch_free(self) -> None:
        """Until no exchange fault is pending (IMS has one exchange switch; arming replaces what it holds), so an
        exchange fault (a refusal, a 5xx, a lost answer) never replaces one armed just before that no exchange
        has met yet."""
        from django.db import connection

        from serenity.sandbox.ims.models import Switch

        deadline = time.monotonic() + EXCHANGE_SWITCH_WAIT
        try:
            while time.monotonic() < deadline and not self.stop_faults.is_set():
                if not Switch.objects.filter(name=Switch.EXCHANGE, remaining__gt=0).exists():
                    return
                time.sleep(0.5)
        finally:
            connection.close()

    def rolling_deploy(self) -> None:
        """A deploy as an orchestrator rolls it: each worker in turn gets SIGTERM (a warm shutdown), is started
        again and is consuming before the next one stops; then the API's gunicorn master gets SIGHUP (new
        workers, the old ones finish their requests). The API never stops answering."""
        for name in WORKERS:
            with self.lock:
                self.worker_stops.append((time.time(), "SIGTERM"))
            self._signal(name, signal.SIGTERM, grace=60)
            self.on_main_thread(lambda name=name: self.start_worker(name))
            self.wait_consuming(self.procs[name].pid)
        os.kill(self.procs["api"].pid, signal.SIGHUP)

    def wait_consuming(self, pid: int, timeout: float = 60) -> None:
        """Until the worker process `pid` wrote its first heartbeat (its consumer loop turns)."""
        from django.db import connection

        from jobs.models import WorkerHeartbeat

        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if WorkerHeartbeat.objects.filter(worker__endswith=f":{pid}").exists():
                    return
                time.sleep(0.5)
        finally:
            connection.close()

    def terminate_backends(self, rng: random.Random, share: float = 0.5) -> int:
        """pg_terminate_backend on a random `share` of the product's connections to the soak database (all of
        them: a failover). The harness's own are left alone (it is the observer), and so are the simulators'
        (they stand in for services with databases of their own, which a failover of ours does not touch)."""
        import psycopg

        with psycopg.connect(self.config.database_url, autocommit=True) as conn:
            pids = [
                r[0]
                for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND application_name NOT IN (%s, %s)",
                    (stacks.HARNESS_APP_NAME, SIMULATORS_APP_NAME),
                )
            ]
            count = len(pids) if share >= 1 else (len(pids) + 1) // 2
            chosen = rng.sample(pids, k=count) if pids else []
            for pid in chosen:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with self.lock:
            self.database_faults.append(time.time())
        return len(chosen)

    def arm_drs(self, g: Generation) -> None:
        from serenity.sandbox.drs import controls as drs

        if g.drs_fault == "DRS slow":
            drs.set_latency(DRS_SLOW_MS, brand=g.brand_name, remaining=1)
        elif g.drs_fault == "DRS timeout":
            drs.set_latency(DRS_TIMEOUT_MS, brand=g.brand_name, remaining=1)
        elif g.drs_fault == "DRS failure (5xx)":
            drs.set_switch("status_500", brand=g.brand_name, remaining=1)
        if g.drs_fault:
            self.record_fault(g.drs_fault, g.brand_name)

    def watch_readyz(self) -> None:
        url = self.stack.url("api") + "/readyz"
        while not self.stop_watch.is_set():
            at, why = time.monotonic(), None
            try:
                with urllib.request.urlopen(url, timeout=READYZ_TIMEOUT) as response:  # noqa: S310 (local URL)
                    if response.status != 200:
                        why = f"HTTP {response.status}"
            except urllib.error.HTTPError as error:
                why = f"HTTP {error.code}"
            except (urllib.error.URLError, OSError) as error:
                why = type(getattr(error, "reason", error)).__name__
            if why:
                with self.lock:
                    self.readyz_failures.append((at, why))
            self.stop_watch.wait(READYZ_EVERY)

    # --- generations ----------------------------------------------------------------------------------
    def plan(self) -> None:
        """The generations, their flows and their start times, all from the seed."""
        from markets import geo

        countries = [c for c in geo.COUNTRY_CODES if c not in ("US",)]
        window = self.config.minutes * 60 * 0.8
        drs_kinds = list(DRS_FAULTS)
        for i in range(self.config.jobs):
            roll, drs_fault = self.rng.random(), None
            edge = 0.0
            for kind, share in DRS_FAULTS.items():
                edge += share
                if roll < edge:
                    drs_fault = kind
                    break
            if i < len(drs_kinds):  # every DRS fault at least once, however short the run
                drs_fault = drs_kinds[i]
            if self.config.kinds != tuple(FAULT_KINDS):  # a narrowed run (SOAK_FAULTS) injects only those
                drs_fault = None
            self.generations.append(
                Generation(
                    index=i,
                    flow="activate" if self.rng.random() < 0.25 else "create",
                    drs_fault=drs_fault,
                    regenerate=self.rng.random() < 0.15,
                    start_at=window * i / max(1, self.config.jobs),
                    country=self.rng.choice(countries),
                )
            )

    def prepare(self, g: Generation) -> None:
        """An active brand with a Semrush workspace, its own organization and user, and that user's bearer."""
        from django.conf import settings

        from markets.models import Brand, Organization, Site
        from serenity.sandbox.ims.keys import issue_user_token
        from serenity.sandbox.semrush import services

        tag = f"{g.index:04d}{uuid.uuid4().hex[:6].upper()}"
        ims_org, g.user = f"SOAK{tag}{'0' * 14}@AdobeOrg", f"SOAK{tag}USER@AdobeID"
        g.brand_name, g.domain = f"Soak Brand {tag}", f"soak-{tag.lower()}.example"
        org = Organization.objects.create(ims_org_id=ims_org, name=f"Soak {tag}", is_serenity_active=True)
        brand = Brand.objects.create(
            organization=org,
            name=g.brand_name,
            display_name=g.brand_name,
            domain=g.domain,
            primary_url=f"https://{g.domain}/",
            status=Brand.Status.ACTIVE,
        )
        site = Site.objects.create(organization=org, brand=brand, base_url=f"https://{g.domain}/")
        workspace = services.workspace_create(name=brand.name, parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID)
        Brand.objects.filter(id=brand.id).update(base_site=site, semrush_workspace_id=workspace.id)
        g.org, g.brand = str(org.id), str(brand.id)
        g.token = issue_user_token(user_id=g.user, org_ids=[ims_org], ttl=6 * 3600)

    def call(self, g: Generation, path: str, body: dict | None = None, *, attempts: int = 12) -> tuple[int, dict]:
        """POST to the API as the generation's user, as a UI would: a dropped connection (the API restarting)
        or a 5xx/503 is tried again after a pause. Returns the last status and body."""
        url = f"{self.stack.url('api')}/v2/orgs/{g.org}/brands/{g.brand}/serenity/{path}"
        status, doc = 0, {}
        for attempt in range(attempts):
            data = json.dumps(body).encode() if body is not None else b""
            request = urllib.request.Request(  # noqa: S310 (a local URL)
                url,
                data=data,
                method="POST",
                headers={
                    "Authorization": f"Bearer {g.token}",
                    "Content-Type": "application/json",
                    "x-promise-audience": "semrush",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (local URL)
                    status, raw = response.status, response.read()
            except urllib.error.HTTPError as error:
                status, raw = error.code, error.read()
            except (urllib.error.URLError, OSError) as error:
                status, raw = 0, json.dumps({"transport": str(error)}).encode()
            doc = self.answered(status, raw, path)
            if status and status < 500 and status != 429:
                return status, doc
            g.notes.append(f"{path.split('/')[-1]}: {status or 'no answer'} (try {attempt + 1})")
            time.sleep(min(0.5 * 2**attempt, 5))
        return status, doc

    def answered(self, status: int, raw: bytes, path: str) -> dict:
        """The answer's document; a 5xx is kept, with its problem code, for the API 5xx invariant."""
        try:
            doc = json.loads(raw or b"{}")
        except ValueError:
            doc = {"raw": raw[:200].decode("utf-8", "replace")}
        if status >= 500:
            code = str(doc.get("code", "")) if isinstance(doc, dict) else ""
            with self.lock:
                self.server_errors.append((time.time(), status, code, path.split("/")[-1]))
        return doc if isinstance(doc, dict) else {"raw": str(doc)[:200]}

    def poll(self, g: Generation) -> None:
        """GET the generation's job as the UI polls it; only the status matters here (a 5xx is kept)."""
        url = f"{self.stack.url('api')}/v2/orgs/{g.org}/brands/{g.brand}/serenity/markets/generation/jobs/{g.job}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {g.token}"})  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (local URL)
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        except (urllib.error.URLError, OSError):
            return  # the API restarting: no answer is not a 5xx
        self.answered(status, raw, "job")

    def begin(self, g: Generation) -> None:
        market = {"market": g.country, "languageCode": "en"}
        brand = {"brandDomain": g.domain, "brandNames": [g.brand_name]}
        if g.flow == "create":
            status, doc = self.call(g, "markets", {**brand, **market, "generatePrompts": True})
            handle = doc.get("promptGeneration") or {}
            g.market = doc.get("id") or doc.get("marketId")
        else:
            status, doc = self.call(g, "activate", {**brand, "generatePrompts": True, "markets": [market]})
            entry = (doc.get("markets") or [{}])[0]
            status = entry.get("status", status)
            body = entry.get("body") or {}
            handle = body.get("promptGeneration") or {}
            g.market = body.get("id") or body.get("marketId")
        if status in (201, 409) and not handle.get("jobId") and g.market:
            # The market exists without a job: the producer failed after the market was made (201 without a
            # handle, e.g. its database connection terminated), or an earlier attempt was cut off between the
            # two (409 without one). What the UI offers then: generate the market's prompts again (SPEC §12).
            g.recovered += 1
            status, doc = self.call(g, f"markets/{g.market}/generation")
            handle = doc if status == 202 else {}
        if status in (201, 202, 409) and handle.get("jobId"):
            g.job = handle["jobId"]
        else:
            g.outcome = f"not started (API answered {status})"
            g.notes.append(json.dumps(doc)[:300])

    def wait_terminal(self, g: Generation, deadline: float):
        from jobs.models import AsyncJob, JobStatus

        polled = 0.0
        while True:
            job = AsyncJob.objects.filter(id=g.job or "").values("status", "error_code").first()
            if job and job["status"] != JobStatus.IN_PROGRESS:
                return job
            if time.monotonic() > deadline:
                return job
            if time.monotonic() - polled >= POLL_EVERY:
                polled = time.monotonic()
                self.poll(g)
            time.sleep(1)

    def drive(self, g: Generation, deadline: float) -> None:
        from django.db import connection

        try:
            delay = g.start_at - self.now()
            if delay > 0:
                time.sleep(delay)
            if time.monotonic() > deadline:
                return
            self.prepare(g)
            self.arm_drs(g)
            g.began = time.monotonic()
            self.begin(g)
            while g.job:
                job = self.wait_terminal(g, deadline)
                if job is None or job["status"] == "IN_PROGRESS":
                    g.outcome = "IN_PROGRESS"
                    return
                if g.first_end is None:
                    g.first_end, g.first_status = time.monotonic(), job["status"]
                g.outcome = job["status"] if job["status"] == "COMPLETED" else f"FAILED {job['error_code']}"
                if job["error_code"] == "NEEDS_REAUTH" and g.reauths < MAX_REAUTHS:
                    g.reauths += 1
                    status, doc = self.call(g, f"markets/generation/jobs/{g.job}/reauth")
                    if status != 202:
                        g.notes.append(f"reauth: {status} {json.dumps(doc)[:200]}")
                    continue
                if g.regenerate and not g.regenerated and g.market:
                    g.regenerated += 1
                    status, doc = self.call(g, f"markets/{g.market}/generation")
                    if status != 202:
                        g.notes.append(f"regenerate: {status} {json.dumps(doc)[:200]}")
                    continue
                return
        except Exception as exc:  # a harness error is an outcome, not a crash of the soak
            g.outcome = f"harness error: {type(exc).__name__}"
            g.notes.append(repr(exc)[:300])
        finally:
            connection.close()

    # --- the run --------------------------------------------------------------------------------------
    def run(self) -> Result:
        started, t0 = datetime.now(UTC), time.monotonic()
        self.say(
            f"--- soak: seed {self.config.seed}, {self.config.jobs} generations, "
            f"{self.config.minutes:g} min of faults, logs in {self.stack.var}"
        )
        self.start()
        self.t0 = time.monotonic()
        self.plan()
        self.stop_watch = threading.Event()
        watcher = threading.Thread(target=self.watch_readyz, daemon=True)
        watcher.start()
        fault_rng = random.Random(self.config.seed * 7919 + 1)
        injector = threading.Thread(target=self.inject_faults, args=(self.schedule(), fault_rng), daemon=True)
        injector.start()
        fault_end = self.t0 + self.config.minutes * 60
        deadline = fault_end + SETTLE_SECONDS
        threads = max(8, min(32, self.config.jobs // 10))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="generation") as pool:
            futures = [pool.submit(self.drive, g, deadline) for g in self.generations]
            last = 0.0
            while not all(f.done() for f in futures):
                if time.monotonic() >= fault_end and not self.stop_faults.is_set():
                    self.say("--- faults stop; settling")
                    self.stop_faults.set()
                if time.monotonic() - last > 30:
                    last = time.monotonic()
                    done = sum(f.done() for f in futures)
                    self.say(
                        f"  {self.now():5.0f} s: {done}/{len(futures)} generations done, "
                        f"{sum(self.faults.values())} faults"
                    )
                self.run_pending_starts()
                time.sleep(0.2)
        self.stop_faults.set()
        while injector.is_alive():
            self.run_pending_starts()
            injector.join(0.2)
        self.quiesce()
        time.sleep(3)  # best-effort invalidations happen just after a job's end
        self.stop_watch.set()
        watcher.join()
        invariants, explained = self.check()
        outcomes = Counter(g.outcome for g in self.generations)
        flows = Counter(g.flow for g in self.generations)
        flows["regenerate"] = sum(g.regenerated for g in self.generations)
        flows["re-authorise"] = sum(g.reauths for g in self.generations)
        flows["regenerate a market left without its job"] = sum(g.recovered for g in self.generations)
        latencies = {
            g.index: g.first_end - g.began
            for g in self.generations
            if g.began is not None and g.first_end is not None and g.first_status == "COMPLETED"
        }
        return Result(
            self.config, started, time.monotonic() - t0, self.faults, outcomes, flows, invariants, explained, latencies
        )

    def quiesce(self) -> None:
        """Faults off: every switch reset (the throttling limits included), both workers and the API up (a fault's
        restart may be pending)."""
        from serenity.sandbox.drs import controls as drs
        from serenity.sandbox.ims import controls as ims
        from serenity.sandbox.semrush import controls as semrush

        with self.lock:
            if self.throttling is not None:
                self.throttling.cancel()
                self.throttling = None
        drs.clear()
        drs.set_concurrency_limit(None)  # not drs.reset(): it would forget the call ledger the invariants read
        ims.reset()
        semrush.reset()  # its rate limit included

    # --- invariants -----------------------------------------------------------------------------------
    def check(self) -> tuple[list[Invariant], list[str]]:
        from django.db import connection

        from jobs.models import AsyncJob, JobEvent, JobStatus
        from serenity.sandbox.drs.models import DrsCall
        from serenity.sandbox.ims import ledger
        from serenity.sandbox.semrush.models import Call, Project, Prompt
        from tokens.models import PromiseGrant

        out: list[Invariant] = []
        job_ids: list[Any] = [g.job for g in self.generations if g.job]
        jobs = {str(j.id): j for j in AsyncJob.objects.filter(id__in=job_ids)}

        stuck = [j for j in jobs.values() if j.status == JobStatus.IN_PROGRESS]
        out.append(
            Invariant(
                "jobs left IN_PROGRESS after the settle bound",
                len(stuck),
                "0",
                not stuck,
                ", ".join(str(j.id) for j in stuck[:10]),
            )
        )
        unexplained = [j for j in jobs.values() if j.status == JobStatus.FAILED and not j.error_code]
        out.append(Invariant("FAILED jobs without a stated reason", len(unexplained), "0", not unexplained))
        missing = [g for g in self.generations if g.job and g.job not in jobs]
        out.append(Invariant("generations whose job vanished", len(missing), "0", not missing))

        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT project_id, text, count(*) FROM {Prompt._meta.db_table} "  # noqa: S608
                "GROUP BY project_id, text HAVING count(*) > 1"
            )
            duplicates = cursor.fetchall()
        out.append(
            Invariant(
                "duplicate prompts in any Semrush project",
                sum(n - 1 for _, _, n in duplicates),
                "0",
                not duplicates,
                "; ".join(f"{p}: {t[:40]!r} x{n}" for p, t, n in duplicates[:5]),
            )
        )

        # Publishes: one by the market's creation, one per completed run; a failed run never publishes.
        events: defaultdict[str, list[Any]] = defaultdict(list)
        for e in (
            JobEvent.objects.filter(job_id__in=job_ids).order_by("at", "id").values("job_id", "kind", "detail", "at")
        ):
            events[str(e["job_id"])].append(e)
        published_by_failed = []
        for g in self.generations:
            job = jobs.get(g.job or "")
            if job is None or job.status != JobStatus.FAILED or not job.checkpoints.get("projectId", g.market):
                continue
            project = Project.objects.filter(
                workspace__id=job.params.get("workspaceId"), geo_target_id=job.params.get("geoTargetId")
            ).first()
            if project is None:
                continue
            publishes = Call.objects.filter(
                path=f"/sandbox/semrush/v1/ai-projects/{project.id}/publish", method="POST", status=200
            ).count()
            completed = sum(1 for e in events[g.job or ""] if e["kind"] == "completed")
            if publishes > 1 + completed:
                published_by_failed.append(f"{g.job}: {publishes} publishes, {completed} completed runs")
        out.append(
            Invariant(
                "markets published by a failed generation",
                len(published_by_failed),
                "0",
                not published_by_failed,
                "; ".join(published_by_failed[:5]),
            )
        )

        drs_extra, drs_after_batch, explained = self.drs_calls(jobs, events, DrsCall)
        out.append(
            Invariant(
                "DRS calls after the run's batch was persisted",
                len(drs_after_batch),
                "0",
                not drs_after_batch,
                "; ".join(drs_after_batch[:5]),
            )
        )
        out.append(
            Invariant(
                "DRS calls beyond one per run, not explained by a fault",
                len(drs_extra),
                "0",
                not drs_extra,
                "; ".join(drs_extra[:5]),
            )
        )

        live = ledger.live_tokens()
        running = AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).values("id")
        held = PromiseGrant.objects.filter(job_id__in=running).count()
        orphans, lost = self.unowned_tokens(held)
        explained += lost
        out.append(
            Invariant(
                "promise tokens live and unowned (IMS ledger)",
                len(orphans),
                "0",
                not orphans,
                f"{live} live: {held} held by running jobs, {len(lost)} never received by anyone"
                + (f"; {'; '.join(orphans[:5])}" if orphans else ""),
            )
        )
        grants = PromiseGrant.objects.exclude(job_id__in=running).count()
        out.append(Invariant("grants kept by ended jobs", grants, "0", grants == 0))

        spent, throttled, unchecked, codes = self.throttle_accounting(jobs, events)
        explained += throttled
        out.append(
            Invariant(
                "attempts spent on throttling",
                len(spent),
                "0",
                not spent,
                f"{sum(codes.values())} throttled deliveries"
                + (f" ({', '.join(f'{code} x{n}' for code, n in sorted(codes.items()))})" if codes else "")
                + f"; {unchecked} in earlier runs whose attempts the database no longer holds"
                + (f"; {'; '.join(spent[:5])}" if spent else ""),
            )
        )

        leaks = self.token_bytes()
        out.append(Invariant("token bytes in log lines or tables", len(leaks), "0", not leaks, "; ".join(leaks[:5])))

        with self.lock:
            windows = [(a - RESTART_MARGIN, b + RESTART_MARGIN) for a, b in self.api_down]
            outside = [why for t, why in self.readyz_failures if not any(a <= t <= b for a, b in windows)]
            inside = len(self.readyz_failures) - len(outside)
        reasons = ", ".join(f"{why} x{n}" for why, n in Counter(outside).items())
        out.append(
            Invariant(
                "/readyz failures outside the API's own restarts",
                len(outside),
                "0",
                not outside,
                f"{inside} during its restarts" + (f"; outside: {reasons}" if reasons else ""),
            )
        )
        healing, healed = self.healing(events)
        return out + healing, explained + healed

    # --- healing: what a fault cost in time ------------------------------------------------------------
    def healing(self, events: dict[str, list[Any]]) -> tuple[list[Invariant], list[str]]:
        """The invariants of healing: no API 5xx a dependency does not explain, and no receive of a job's message
        that waited out its visibility timeout or ran nothing, unless its worker was SIGKILLed holding it."""
        with self.lock:
            errors = list(self.server_errors)
        upstream = [e for e in errors if e[1] in (502, 503, 504) and e[2] in UPSTREAM_CODES]
        cut = [
            e
            for e in errors
            if e[1] == 503
            and e[2] == "database_unavailable"
            and any(d - 2 <= e[0] <= d + HAND_BACK_AFTER_DATABASE_FAULT for d in self.database_faults)
        ]
        ours = [e for e in errors if e not in upstream and e not in cut]
        out = [
            Invariant(
                "API 5xx answers (not an upstream service's)",
                len(ours),
                "0",
                not ours,
                "; ".join(
                    f"{p}: {status} {code or '-'} (faults near: {self.faults_near(t, 5)})"
                    for t, status, code, p in ours[:5]
                )
                + (f"; {len(upstream)} 502-504 naming an upstream service" if upstream else "")
                + (f"; {len(cut)} 503 database_unavailable (a request cut by terminated backends)" if cut else ""),
            )
        ]
        receipts = self.receipts()
        claims = defaultdict(list)
        for job_id, history in events.items():
            claims[job_id] = [e["at"].timestamp() for e in history if e["kind"] == "lease_claimed"]
        waited_before: list[str] = []
        waited_after: list[str] = []
        ran_nothing: list[str] = []
        explained: list[str] = []
        for r in receipts:
            if r["outcome"] == "deleted":
                continue
            claimed = any(r["t"] <= c <= r["t"] + self.config.visibility for c in claims.get(r["job"], []))
            what = f"job {r['job']} receive {r['count']} at {datetime.fromtimestamp(r['t'], UTC):%H:%M:%S}"
            if r["outcome"] == "handed back":
                if any(d - 2 <= r["t"] <= d + HAND_BACK_AFTER_DATABASE_FAULT for d in self.database_faults):
                    explained.append(
                        f"{what}: handed back at once, its delivery failed before its claim (database fault)"
                    )
                elif not claimed:
                    ran_nothing.append(f"{what}: handed back unrun; faults near: {self.faults_near(r['t'], 5)}")
            elif self.killed_holding(r["t"]):
                explained.append(f"{what}: waited its visibility timeout, its worker SIGKILLed holding it")
            else:
                (waited_after if claimed else waited_before).append(
                    f"{what}: waited its visibility timeout; faults near: {self.faults_near(r['t'], 5)}"
                )
        ran_nothing += waited_before
        delayed = sorted({line.split(" ")[1] for line in waited_before + waited_after})
        out += [
            Invariant(
                "deliveries that failed before their claim and waited a visibility timeout",
                len(waited_before),
                "0",
                not waited_before,
                "; ".join(waited_before[:5]),
            ),
            Invariant(
                "jobs delayed by a visibility timeout, not by a SIGKILL mid-delivery",
                len(delayed),
                "0",
                not delayed,
                "; ".join((waited_before + waited_after)[:5]),
            ),
            Invariant(
                "receives that ran nothing",
                len(ran_nothing),
                "0",
                not ran_nothing,
                f"{len(receipts)} receives of job messages"
                + (f"; {'; '.join(ran_nothing[:5])}" if ran_nothing else ""),
            ),
        ]
        return out, explained

    def killed_holding(self, received: float) -> bool:
        """A worker was SIGKILLed while a message received at `received` could still be held by it: from the
        receive to its visibility timeout, and also a receive just after the kill, by the long poll the killed
        worker left in flight (SQS answers it though nobody reads the answer)."""
        from django.conf import settings

        poll = float(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("wait_time_seconds", 0)) + 1
        return any(
            received - poll <= t <= received + self.config.visibility + 1
            for t, how in self.worker_stops
            if how == "SIGKILL"
        )

    def receipts(self) -> list[dict[str, Any]]:
        """Every receive of a job message by the product, from the local SQS's ledger, with what became of its
        receipt: `deleted` (a delivery ran it, held it back or dropped it), `handed back` (visibility 0) or
        `waited` (nothing: it came back, or would come back, when its visibility timeout ran out). The soak's own
        receives, and receives of the last seconds with nothing done yet (a delivery may be acting on them), are
        left out."""
        from django.conf import settings

        lines = [json.loads(line) for line in self.ledger_path.read_text().splitlines() if line.strip()]
        queue = settings.MARKET_JOBS_QUEUE
        bodies: dict[str, str] = {}
        ops: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        received = []
        for line in lines:
            if line.get("queue") != queue:
                continue
            if line["op"] == "receive":
                if line.get("body"):
                    bodies[line["id"]] = job_of(line["body"])
                received.append(line)
            else:
                ops[line["receipt"]].append(line)
        recent = time.time() - RECENT_RECEIVE_SECONDS
        with self.lock:
            ours = set(self.harness_receipts)
        out = []
        for r in received:
            done = ops.get(r["receipt"], [])
            if r["receipt"] in ours or (not done and r["t"] > recent):
                continue
            outcome = (
                "deleted"
                if any(o["op"] == "delete" or o.get("timeout", 0) > 0 for o in done)
                else "handed back"
                if done
                else "waited"
            )
            out.append({**r, "job": bodies.get(r["id"], "?"), "outcome": outcome})
        return out

    def unowned_tokens(self, held: int) -> tuple[list[str], list[str]]:
        """Live promise tokens no running job holds. Explained (listed, not counted): a token that reached no
        one who could invalidate it — IMS rotated it for an exchange whose answer it then lost, or minted it
        for a request whose answer was lost or whose API process was SIGKILLed meanwhile — and a token whose
        holder was cut off: its job lost a delivery to a SIGKILL, or ended just before a SIGKILL (the
        best-effort invalidation runs after the end is committed), or the product logged that IMS did not
        confirm its invalidation. It expires at IMS. Any other is an orphan."""
        from jobs.models import AsyncJob
        from serenity.sandbox.ims import ledger
        from serenity.sandbox.ims.models import LedgerEvent, PromiseRecord, PromiseState

        lost = set(LedgerEvent.objects.filter(kind=ledger.ANSWER_LOST).values_list("fingerprint", flat=True))
        offset = time.time() - time.monotonic()
        api_kills = [a + offset for a, _b in self.api_down]
        kills = [t for t, how in self.worker_stops if how == "SIGKILL"]
        refused = self.invalidations_refused()
        users = {g.user: g for g in self.generations}
        orphans, explained = [], []
        for record in PromiseRecord.objects.filter(state=PromiseState.LIVE).order_by("created_at"):
            g = users.get(record.user_id)
            job = AsyncJob.objects.filter(id=g.job).first() if g and g.job else None
            who = f"generation {g.index} (job {g.job})" if g else record.user_id
            made = record.created_at.timestamp()
            ended = job.ended_at.timestamp() if job and job.ended_at else None
            if record.replaces and record.replaces[:16] in lost:
                why = "rotated by an exchange whose answer was lost"
            elif not record.replaces and record.fingerprint in lost:
                why = "minted, and the mint's answer was lost"
            elif not record.replaces and any(k - 30 <= made <= k for k in api_kills):
                why = "minted just before its API process was killed"
            elif job and job.lost_deliveries:
                why = f"its job lost {job.lost_deliveries} delivery(ies) to a killed worker"
            elif ended and any(ended <= k <= ended + 10 for k in kills):
                why = "its job ended just before a worker was SIGKILLed, before the best-effort invalidation"
            elif job and str(job.id) in refused:
                why = "IMS did not confirm its best-effort invalidation (logged by the product)"
            else:
                orphans.append(
                    f"token {record.fingerprint} of {who}, {'rotated' if record.replaces else 'minted'} "
                    f"at {record.created_at:%H:%M:%S}, job {job.status if job else '-'}; faults near: "
                    f"{self.faults_near(made)}"
                )
                continue
            explained.append(f"token {record.fingerprint} of {who}: a live promise token, {why}")
        return orphans[held:] if held else orphans, explained

    def invalidations_refused(self) -> set[str]:
        """Job ids for which the product logged a failed best-effort invalidation."""
        jobs = set()
        for path in self.stack.var.glob("*.log"):
            for line in path.read_text(errors="replace").splitlines():
                if "promise token invalidation failed" in line:
                    try:
                        jobs.add(str(json.loads(line).get("job_id")))
                    except ValueError:
                        continue
        return jobs

    def drs_calls(self, jobs, events, DrsCall) -> tuple[list[str], list[str], list[str]]:
        """Each DRS call belongs to one run of one generation (its brand names it; a `replaced` event starts a
        new run). Per run: no call after the batch was persisted, and no more than one call that shipped,
        unless the earlier one was slowed past the client's timeout by the soak, or was in flight when its
        worker was stopped by the soak (SIGKILL, or SIGTERM, whose warm shutdown hands the job to another
        worker without waiting for the call): explained, listed."""
        by_brand = defaultdict(list)
        for call in DrsCall.objects.order_by("id").values("brand", "outcome", "received_at"):
            by_brand[call["brand"]].append(call)
        timeout = TIMEOUTS["DRS_TIMEOUT_SECONDS"]
        stops = list(self.worker_stops)
        extra, after_batch, explained = [], [], []
        for g in self.generations:
            job = jobs.get(g.job or "")
            if job is None:
                continue
            starts = [e["at"] for e in events[g.job] if e["kind"] == "replaced"]
            batches = [e["at"] for e in events[g.job] if e["kind"] == "checkpoint" and e["detail"] == "generated"]
            runs = defaultdict(list)
            for call in by_brand.get(g.brand_name, []):
                run = sum(1 for s in starts if s <= call["received_at"])
                runs[run].append(call)
            slow_first = g.drs_fault == "DRS timeout"
            for run, calls in runs.items():
                begin = starts[run - 1] if run else None
                end = starts[run] if run < len(starts) else None
                persisted = [b for b in batches if (begin is None or b >= begin) and (end is None or b < end)]
                if persisted:
                    late = [c for c in calls if c["received_at"] > persisted[0]]
                    after_batch += [f"{g.job} run {run}: call at {c['received_at']:%H:%M:%S}" for c in late]
                shipped = [c for c in calls if c["outcome"] == "ship"]
                # The call the "DRS timeout" switch slowed: the first one admitted (a throttled one took no switch).
                admitted = [c for c in calls if c["outcome"] != "throttled"]
                for earlier in shipped[:-1]:
                    at = earlier["received_at"].timestamp()
                    if slow_first and run == 0 and earlier is admitted[0]:
                        explained.append(
                            f"{g.job}: a second DRS call, the first held past the client's {timeout} s timeout"
                        )
                    elif cut := [how for d, how in stops if at <= d <= at + timeout + DRS_TIMEOUT_MS / 1000]:
                        explained.append(
                            f"{g.job}: a second DRS call, the first in flight when its worker was stopped ({cut[0]})"
                        )
                    else:
                        times = ", ".join(f"{c['received_at']:%H:%M:%S.%f}"[:-3] for c in shipped)
                        extra.append(
                            f"{g.job} run {run}: {len(shipped)} calls shipped at {times}; faults near: "
                            f"{self.faults_near(at)}"
                        )
        return extra, after_batch, explained

    def throttle_accounting(self, jobs, events) -> tuple[list[str], list[str], int, Counter]:
        """A throttled delivery gives back the attempt its claim counted (`_throttled`, jobs/services/runner.py),
        so at the end of a run (from its `created`, `replaced`, `reauthorized` or `rerun` event) the job's
        attempts equal its claims (`lease_claimed` events) less its throttled deliveries (`throttled` events):
        every attempt more is one a throttle spent. A run's attempts at its end are known for the job's last run
        (the row's `attempts`) and for an earlier run that ended RETRIES_EXHAUSTED (JOB_MAX_ATTEMPTS, or one more
        when the claim found the budget already spent); the throttles of other earlier runs are counted apart.
        Returns (one line per attempt spent, one line per throttled delivery that spent none, how many throttled
        deliveries were not checked, and every throttled delivery by its code)."""
        from django.conf import settings

        spent: list[str] = []
        given_back: list[str] = []
        unchecked, all_codes = 0, Counter[str]()
        for job_id, history in events.items():
            job = jobs.get(job_id)
            runs: list[list[dict[str, Any]]] = []
            for e in history:
                if e["kind"] in RUN_STARTS or not runs:
                    runs.append([])
                runs[-1].append(e)
            for index, run in enumerate(runs):
                throttles = [e for e in run if e["kind"] == "throttled"]
                if not throttles:
                    continue
                codes = [e["detail"].split(":", 1)[0] for e in throttles]
                all_codes.update(codes)
                end = next((e for e in reversed(run) if e["kind"] == "failed"), None)
                if index == len(runs) - 1 and job is not None:
                    attempts = job.attempts
                elif end is not None and end["detail"].startswith("RETRIES_EXHAUSTED"):
                    earlier = "attempts exhausted by earlier deliveries" in end["detail"]
                    attempts = settings.JOB_MAX_ATTEMPTS + (1 if earlier else 0)
                else:
                    unchecked += len(throttles)
                    continue
                claims = sum(1 for e in run if e["kind"] == "lease_claimed")
                kept = min(len(throttles), max(0, attempts + len(throttles) - claims))
                ending = f", ended {end['detail'][:60]}" if end else ""
                spent += [
                    f"job {job_id} run {index}: {claims} claims, {len(throttles)} throttled, {attempts} attempts"
                    f"{ending}"
                ] * kept
                given_back += [
                    f"job {job_id}: a throttled delivery ({code}), its attempt given back"
                    for code in codes[: len(codes) - kept]
                ]
        return spent, given_back, unchecked, all_codes

    def token_bytes(self) -> list[str]:
        """Every JWT-shaped value (bearers, promise and access tokens are all JWTs) and every bearer the soak
        issued, in any log file of any process and in any row of any table of the soak's database."""
        from django.db import connection

        known = {g.token.encode() for g in self.generations if g.token}
        found = []
        for path in sorted(self.stack.var.glob("*.log")):
            data = path.read_bytes()
            hits = len(JWT.findall(data)) + sum(data.count(k) for k in known)
            if hits:
                found.append(f"{path.name}: {hits}")
        with connection.cursor() as cursor:
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            for (table,) in cursor.fetchall():
                cursor.execute(
                    f'SELECT count(*) FROM "{table}" t WHERE t::text ~ %s',  # noqa: S608
                    [r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+"],
                )
                rows = cursor.fetchone()[0]
                if rows:
                    found.append(f"table {table}: {rows} rows")
        return found


def job_of(body: str) -> str:
    """The job id a job message carries (kombu's envelope: base64 JSON around a base64 Celery body)."""
    import base64

    try:
        envelope = json.loads(base64.b64decode(body))
        text = base64.b64decode(envelope["body"]).decode()
    except (ValueError, KeyError, TypeError):
        text = body
    found = re.search(r'"jobId":\s*"([0-9a-fA-F-]{36})"', text)
    return found.group(1) if found else "?"


def added_latency(calm: dict[int, float], faulted: dict[int, float]) -> dict[str, float] | None:
    """Per generation completed at its first end in both runs: the seconds the faults added to it."""
    added = sorted(faulted[i] - calm[i] for i in faulted.keys() & calm.keys())
    if not added:
        return None
    return {
        "generations": len(added),
        "median": added[len(added) // 2],
        "p95": added[min(len(added) - 1, int(len(added) * 0.95))],
        "baseline_median": sorted(calm.values())[len(calm) // 2],
    }


# --- report -------------------------------------------------------------------------------------------
def table(result: Result) -> str:
    c = result.config
    lines = [
        f"Seed {c.seed}, {c.jobs} generations, {c.minutes:g} min of faults (one every ~{c.fault_every:g} s), "
        f"{result.seconds:.0f} s in all.",
        "",
        "| fault injected | count |",
        "| --- | --- |",
    ]
    lines += [f"| {kind} | {n} |" for kind, n in sorted(result.faults.items())]
    lines += ["", "| flow | count |", "| --- | --- |"]
    lines += [f"| {flow} | {n} |" for flow, n in sorted(result.flows.items())]
    lines += ["", "| generation outcome | count |", "| --- | --- |"]
    lines += [f"| {outcome} | {n} |" for outcome, n in sorted(result.outcomes.items())]
    lines += ["", "| invariant | count | bound | holds |", "| --- | --- | --- | --- |"]
    lines += [f"| {i.name} | {i.count} | {i.bound} | {'yes' if i.holds else '**NO**'} |" for i in result.invariants]
    if result.added:
        a = result.added
        lines += [
            "",
            "Added latency against a fault-free run of the same seed (seconds from a generation's first request to",
            f"its job's first end, {a['generations']:g} generations completed in both; the fault-free median is "
            f"{a['baseline_median']:.1f} s):",
            "",
            "| added latency | median | p95 |",
            "| --- | --- | --- |",
            f"| per generation | {a['median']:.1f} s | {a['p95']:.1f} s |",
        ]
    if result.explained:
        reasons = Counter(line.split(": ", 1)[1] for line in result.explained)
        lines += [
            "",
            "Within the bounds, explained by an injected fault (each listed by `make soak`):",
            "",
            "| explained | count |",
            "| --- | --- |",
        ]
        lines += [f"| {why} | {n} |" for why, n in sorted(reasons.items())]
    return "\n".join(lines)


def as_json(result: Result) -> dict:
    return {
        "faults": dict(result.faults),
        "outcomes": dict(result.outcomes),
        "flows": dict(result.flows),
        "invariants": [
            {"name": i.name, "count": i.count, "holds": i.holds, "detail": i.detail} for i in result.invariants
        ],
        "explained": result.explained,
        "added_latency": result.added,
    }


def write_report(result: Result) -> None:
    doc = ROOT / "docs" / "soak.md"
    text = doc.read_text() if doc.exists() else "# Soak\n"
    begin, end = "<!-- soak:begin -->", "<!-- soak:end -->"
    report = f"{begin}\nLatest `make soak`: {result.started:%Y-%m-%d %H:%M} UTC.\n\n{table(result)}\n{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + report + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + report + "\n"
    doc.write_text(text)


def say(text: str) -> None:
    print(text, flush=True)


def run(config: Config, *, out=say) -> Result:
    """Start the stack, soak it, stop it; the stack's scratch directory is removed when nothing broke. With a
    baseline, the same seed first runs without faults, for each generation's added latency."""
    import shutil

    ports = None
    baseline: Result | None = None
    if config.baseline and config.kinds:
        calm = Soak(replace(config, kinds=(), baseline=False), out=out)
        out("--- the fault-free baseline of the same seed")
        try:
            baseline = calm.run()
        finally:
            calm.stack.stop()
        from django.db import connections

        connections.close_all()  # the next run recreates the database: no connection of this one survives it
        shutil.rmtree(calm.stack.var, ignore_errors=True)
        ports = calm.stack.ports
        out("--- the soak")
    soak = Soak(config, out=out, ports=ports)
    try:
        result = soak.run()
    finally:
        soak.stack.stop()
    if baseline is not None:
        result.added = added_latency(baseline.latencies, result.latencies)
    for line in result.explained:
        out(f"  explained: {line}")
    for invariant in result.invariants:
        out(
            f"  {'ok  ' if invariant.holds else 'FAIL'} {invariant.name}: {invariant.count}"
            + (f" ({invariant.detail})" if invariant.detail else "")
        )
    if not result.broken:
        shutil.rmtree(soak.stack.var, ignore_errors=True)
    else:
        out(f"  logs kept in {soak.stack.var}")
    return result


def main(argv: list[str]) -> int:
    config = Config.from_env()
    try:
        result = run(config)
    except stacks.Failed as failure:
        print(f"\nmake soak: {failure}", flush=True)
        return 2
    if not result.broken:
        stacks.drop_database(config.database_url)  # kept when broken, for a look at what happened
    if "--no-report" not in argv:
        write_report(result)
    if "--json" in argv:
        Path(argv[argv.index("--json") + 1]).write_text(json.dumps(as_json(result), indent=1))
    print("\n" + table(result), flush=True)
    if result.broken:
        print("\nmake soak: broken: " + "; ".join(i.name for i in result.broken), flush=True)
        return 1
    print("\nEvery invariant holds." + ("" if "--no-report" in argv else " Written to docs/soak.md."), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
