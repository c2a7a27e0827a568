"""The soak's settings: its timeouts and environment, the fault kinds and their weights, and Config."""

import os
import re
from dataclasses import dataclass

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
# A job's token is invalidated at IMS after its end is committed, best effort: two attempts of up to the IMS timeout
# each, a short backoff between; after that the product has invalidated it or logged that IMS did not confirm.
INVALIDATION_SECONDS = 2 * TIMEOUTS["IMS_TIMEOUT_SECONDS"] + 1
POLL_EVERY = 2  # a generation waiting for its job polls it over the API, as the UI does
# API answers a dependency explains: the product names the upstream service that did not answer.
UPSTREAM_CODES = frozenset({"upstream_unavailable", "semrush_unavailable"})


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
