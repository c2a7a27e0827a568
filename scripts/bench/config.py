"""Where the bench runs and how big: the profiles, the scenarios, their targets."""

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scripts.bench import fit

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
sys.path.insert(0, str(ROOT))  # benchmarks.settings and the product, imported below after django.setup()
BIN = Path(PYTHON).parent

DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/serenity_bench")


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is. `full` is what `make bench` measures; `ci` (BENCH_PROFILE=ci) is the same
    scenarios at a few requests and a handful of jobs with DRS in milliseconds, run by the suite
    (tests/test_bench.py) so that a broken scenario fails `make test` rather than a newcomer's `make bench`."""

    worker_threads: int = 8
    drs_latency_ms: int = 1000
    create_samples: int = 14  # per path; with the 50 activated markets, 64 jobs wait for the worker
    activate_markets: int = 50
    timeit_number: int = 200  # requests per in-process round, and rounds
    timeit_rounds: int = 7
    wrk_seconds: int = 6
    wrk_rounds: int = 2
    wrk_connections: int = 16
    # Scale: one worker process holding every generation in flight at once.
    scale_jobs: int = 512
    scale_drs_ms: int = 60_000
    scale_concurrency: int = 512
    # Fairness: a worker of fair_capacity generations, DRS at fair_drs_ms; organization A queues fair_a_jobs.
    fair_capacity: int = 64
    fair_drs_ms: int = 10_000
    fair_a_jobs: int = 256
    # Wait: jobs whose COMPLETED a waiting client learns; a job of wait_job_s seconds, waited for vs polled every
    # 2 s; wait_many concurrent waiting polls while wrk measures an ordinary poll.
    wait_jobs: int = 200
    wait_job_s: float = 10.0
    wait_many: int = 1000
    # Budgets: budget_jobs on budget_processes worker processes of budget_threads, DRS at budget_drs_ms, the DRS
    # simulator admitting budget_drs_limit invocations at once and DRS_MAX_IN_FLIGHT the same; then the same jobs
    # with the Semrush simulator admitting budget_semrush_rate calls a second per client pair.
    budget_jobs: int = 2000
    budget_processes: int = 4
    budget_threads: int = 256
    budget_drs_ms: int = 10_000
    budget_drs_limit: int = 200
    # Semrush at production's defaults: semrush_jobs queued (DRS answering at once) on semrush_processes worker
    # processes of semrush_threads (the image's default WORKER_CONCURRENCY), the fleet's budget
    # SEMRUSH_MAX_CALLS_PER_SECOND semrush_budget, the simulator admitting semrush_limit calls a second per client
    # pair as the real account does; first one process, then the processes together.
    semrush_jobs: int = 240
    semrush_budget: int = 8
    semrush_limit: int = 10
    semrush_processes: int = 2
    semrush_threads: int = 512
    # Each process's database pool (DB_POOL_MAX_SIZE): the APIs' and the simulators' fixed, the workers' what the
    # server's max_connections leaves (scripts/bench/fit.py derives it for the machine).
    api_pool: int = 8
    sim_pool: int = 12
    worker_pool: int = 16
    # Scale-out: scaleout_jobs at DRS scaleout_drs_ms on one process of scaleout_threads vs two of half as many;
    # then organization A's crossfair_a_jobs and B's one on two processes of crossfair_threads, DRS crossfair_drs_ms.
    scaleout_jobs: int = 512
    scaleout_drs_ms: int = 60_000
    scaleout_threads: int = 512
    crossfair_threads: int = 32
    crossfair_a_jobs: int = 256
    crossfair_drs_ms: int = 10_000
    env: tuple[tuple[str, str], ...] = ()  # settings of every process of the stack


PROFILES = {
    "full": Sizes(),
    "ci": Sizes(
        worker_threads=2,
        drs_latency_ms=50,
        create_samples=2,
        activate_markets=3,
        timeit_number=5,
        timeit_rounds=1,
        wrk_seconds=1,
        wrk_rounds=1,
        wrk_connections=2,
        scale_jobs=6,
        scale_drs_ms=200,
        scale_concurrency=6,
        fair_capacity=3,
        fair_drs_ms=200,
        fair_a_jobs=6,
        wait_jobs=4,
        wait_job_s=1.0,
        wait_many=20,
        budget_jobs=8,
        budget_processes=2,
        budget_threads=3,
        budget_drs_ms=200,
        budget_drs_limit=2,
        semrush_jobs=8,
        semrush_budget=20,
        semrush_limit=25,
        semrush_threads=4,
        api_pool=4,
        sim_pool=4,
        worker_pool=4,
        scaleout_jobs=6,
        scaleout_drs_ms=200,
        scaleout_threads=6,
        crossfair_threads=2,
        crossfair_a_jobs=6,
        crossfair_drs_ms=200,
        # A short long poll, so that each worker stop waits ~2 s rather than ~11; a share the small capacity
        # can hold B's job against.
        # A held-back delivery comes back after 1 s rather than 10, so the budgets' hold-backs cost seconds.
        env=(("SQS_WAIT_TIME_SECONDS", "1"), ("JOB_ORG_FAIR_SHARE", "2"), ("JOB_FAIR_HOLD_SECONDS", "1")),
    ),
}
PROFILE = os.environ.get("BENCH_PROFILE", "full")


def sizes_set(profile: Sizes, assignments: str) -> Sizes:
    """`profile` with BENCH_SET's `name=value` pairs (comma-separated, integers) applied: a scenario measured at
    a size the machine can carry (e.g. `scaleout_jobs=256,scaleout_threads=256`), named in the report. An
    unknown name or a value that is not an integer is a ValueError naming it."""
    changes: dict[str, Any] = {}  # integers only: `env` is refused below
    for pair in filter(None, (p.strip() for p in assignments.split(","))):
        name, _, value = pair.partition("=")
        name = name.strip()
        if name not in Sizes.__dataclass_fields__ or name == "env":
            raise ValueError(f"BENCH_SET: unknown size {name!r}")
        try:
            changes[name] = int(value)
        except ValueError:
            raise ValueError(f"BENCH_SET: {name} must be an integer, not {value.strip()!r}") from None
    return replace(profile, **changes)


SIZES_SET = os.environ.get("BENCH_SET", "")
SCENARIOS = ("poll", "create", "activate", "worker", "scale", "fairness", "wait", "budgets", "semrush", "scaleout")
# The full profile is sized for this machine (its cores, PostgreSQL's max_connections: scripts/bench/fit.py), then
# BENCH_SET applies. An unknown profile, a BENCH_SET that does not parse, a server that cannot be read or sizes that
# do not fit are refused in main(), before anything starts.
SIZE = PROFILES.get(PROFILE, PROFILES["full"])
SIZES_REFUSED = ""
try:
    MACHINE: fit.Machine | None = fit.probe(DATABASE_URL)
except Exception as unreachable:
    MACHINE, SIZES_REFUSED = None, f"PostgreSQL could not be read ({type(unreachable).__name__}: {unreachable})"
try:
    sizes_set(SIZE, SIZES_SET)  # a BENCH_SET that does not parse is named first, whatever the machine holds
    if MACHINE is not None and PROFILE == "full":
        SIZE = fit.fit(SIZE, MACHINE)
    SIZE = sizes_set(SIZE, SIZES_SET)
    if MACHINE is not None and PROFILE == "full":
        fit.check(SIZE, MACHINE, SCENARIOS)
except ValueError as refused:  # fit.DoesNotFit included
    SIZES_REFUSED = str(refused)
# Where the tables go: docs/benchmarks.md for the full profile; a smaller run writes only where it is told.
REPORT = os.environ.get("BENCH_REPORT") or (str(ROOT / "docs" / "benchmarks.md") if PROFILE == "full" else "")
# Every row, as JSON, when set: what the suite reads back.
ROWS_JSON = os.environ.get("BENCH_ROWS_JSON", "")
# The Lambda a job would run in for its whole DRS wait (the smallest size a Python worker with its clients
# fits in; a larger one only widens the gap).
LAMBDA_MEMORY_MB = 512
WORKER_APP_NAME = "serenity-bench-worker"  # the worker's PostgreSQL connections carry it (PGAPPNAME)
TARGETS = {
    "poll": 0.5,
    "poll_floor": 0.9,
    "worker_cpu_ms": 25,
    "worker_wall": 1.5,
    "worker_cpu_x_bare": 100,
    "worker_sql": 25,
    "create": 0.7,
    "scale_wall": 2.0,
    "scale_rss_mb": 512,
    "scale_pg_connections": 20,
    "intake_claims_per_s": 50,
    "lambda_memory": 0.1,
    "fair_wait": 2.5,
    "fair_alone": 1.10,
    "wait_p95_ms": 100,
    "wait_requests": 3,
    "wait_throughput": 0.8,
    "budget_wall": 1.25,
    "semrush_goodput": 0.9,
    "semrush_calls_per_job": 1.05,
    "scaleout_wall": 1.05,
    "crossfair_wait": 2.5,
}
API_APP_NAME = "serenity-bench-api"  # the flag-on API's pooled PostgreSQL connections carry it (PGAPPNAME)
POLL_EVERY_S = 2.0  # the plain poller the waiting poll is measured against
