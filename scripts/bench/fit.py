"""Sizes that fit the machine the bench runs on: its cores and PostgreSQL's `max_connections`.

Every process of the bench's stack holds PostgreSQL connections: each API process and each simulator process up to
its pool (`DB_POOL_MAX_SIZE`), the flag-on API one listener per process for the waiting polls, beat its pool, the
harness its own, and each worker process its pool. A scenario whose processes together need more than the server
admits fails at the first connection refused, deep in a worker, and the bench hangs on jobs nobody can finish. So
the default sizes are derived here (`fit`), the arithmetic is printed in the run's heading, and a suite test
(tests/test_bench.py) runs it for the stock machine (2 cores, 100 connections): a scenario that cannot fit fails the
suite, not a newcomer's `make bench`.
"""

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from scripts.bench.config import Sizes

API_SERVERS = 2  # the API twice: prompt generation flag on and flag off
API_PROCESSES = 2  # each under gunicorn with WEB_CONCURRENCY's default (serenity/gunicorn.py)
SIM_PROCESSES = 2
BEAT_POOL = 2
HARNESS_POOL = 4  # the harness's own (in-process polls, its reads of the jobs, the wait scenario's commits)
WORKER_POOL_MAX = 16  # the product's default DB_POOL_MAX_SIZE
WORKER_POOL_MIN = 4  # below this a worker of hundreds of threads queues on its pool: the figures would be the pool's


class DoesNotFit(ValueError):
    """The machine has too few connections for the stack and one scenario's workers: the message has the sums."""


@dataclass(frozen=True)
class Machine:
    cores: int
    max_connections: int
    reserved: int = 3  # superuser_reserved_connections
    in_use: int = 0  # connections other clients hold when the bench starts (a shared server)

    @property
    def available(self) -> int:
        return self.max_connections - self.reserved - self.in_use

    def describe(self) -> str:
        return (
            f"{self.cores} cores, PostgreSQL max_connections {self.max_connections} ({self.reserved} reserved, "
            f"{self.in_use} held by other clients at the start: {self.available} available)"
        )


def probe(database_url: str) -> Machine:
    """This machine: its cores, and the PostgreSQL server `database_url` names (read on its `postgres`
    database, so the bench's own need not exist yet)."""
    import os

    import psycopg

    parts = urlsplit(database_url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            "  AND datname IS DISTINCT FROM %s)",
            [parts.path.lstrip("/")],
        ).fetchone()
    assert row is not None
    return Machine(cores=os.cpu_count() or 1, max_connections=row[0], reserved=row[1], in_use=row[2])


def worker_processes(sizes: "Sizes", scenario: str) -> int:
    """Worker processes a scenario runs at once."""
    return {
        "worker": 1,
        "scale": 1,
        "fairness": 1,
        "budgets": sizes.budget_processes,
        "semrush": sizes.semrush_processes,
        "scaleout": 2,
    }.get(scenario, 0)


def most_processes(sizes: "Sizes") -> int:
    return max(worker_processes(sizes, name) for name in ("budgets", "semrush", "scaleout"))


def pool_per_process(sizes: "Sizes", processes: int) -> int:
    """A worker process's pool when `processes` run at once: `worker_pool` is each one's share when the most
    any scenario runs are up; fewer share the same connections (never above the product's default)."""
    return min(WORKER_POOL_MAX, sizes.worker_pool * most_processes(sizes) // max(1, processes))


def stack_connections(sizes: "Sizes") -> dict[str, int]:
    """What the stack holds whatever the scenario: the APIs' pools and listeners, the simulators', beat's and the
    harness's."""
    return {
        "APIs": API_SERVERS * API_PROCESSES * sizes.api_pool + API_PROCESSES,  # + the flag-on API's listeners
        "simulators": SIM_PROCESSES * sizes.sim_pool,
        "beat": BEAT_POOL,
        "harness": HARNESS_POOL,
    }


def connections_needed(sizes: "Sizes", scenario: str) -> dict[str, int]:
    """Every holder of connections while `scenario` runs, at its pools' full size."""
    processes = worker_processes(sizes, scenario)
    return {**stack_connections(sizes), "workers": processes * pool_per_process(sizes, processes)}


def arithmetic(sizes: "Sizes", machine: Machine, scenarios) -> str:
    """The heading's line: the most any scenario needs, summed, against what the server admits."""
    worst = max(scenarios, key=lambda name: sum(connections_needed(sizes, name).values()))
    needed = connections_needed(sizes, worst)
    parts = " + ".join(f"{holder} {count}" for holder, count in needed.items())
    return f"PostgreSQL connections at most ({worst}): {parts} = {sum(needed.values())} of {machine.available}"


def check(sizes: "Sizes", machine: Machine, scenarios) -> None:
    """DoesNotFit naming the first scenario whose connections exceed what the server admits."""
    for name in scenarios:
        needed = connections_needed(sizes, name)
        if sum(needed.values()) > machine.available:
            parts = " + ".join(f"{holder} {count}" for holder, count in needed.items())
            raise DoesNotFit(
                f"{name} needs {parts} = {sum(needed.values())} PostgreSQL connections; {machine.describe()}"
            )


def fit(base: "Sizes", machine: Machine) -> "Sizes":
    """`base` (the full profile) sized for `machine`: the multi-process scenarios scale with its cores (the local SQS
    and the simulators share them with the workers), and each worker process's pool takes what the stack leaves
    of the server's connections, shared by the most worker processes any scenario runs at once."""
    cores = max(1, machine.cores)
    sized = replace(
        base,
        budget_processes=min(4, cores),
        budget_threads=min(256, 64 * cores),
        budget_jobs=min(2000, 250 * cores),
        budget_drs_limit=min(200, 50 * cores),
        scaleout_jobs=min(512, 128 * cores),
        scaleout_threads=min(512, 128 * cores),
    )
    spare = machine.available - sum(stack_connections(sized).values())
    most = most_processes(sized)
    pool = min(WORKER_POOL_MAX, spare // most)
    if pool < WORKER_POOL_MIN:
        raise DoesNotFit(
            f"the stack holds {sum(stack_connections(sized).values())} PostgreSQL connections and {most} worker "
            f"processes need at least {WORKER_POOL_MIN} each; {machine.describe()}"
        )
    return replace(sized, worker_pool=pool)
