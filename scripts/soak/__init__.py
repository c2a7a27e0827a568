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
as JSON (tests/test_soak.py reads it). `make soak` runs `python -m scripts.soak` from the repository root.

Faults are injected only from outside the product: the simulators' switches (sandbox/), signals to
processes, PostgreSQL's pg_terminate_backend and messages sent to or held in the queue.
"""

from scripts.soak.config import DRS_FAULTS, FAULT_KINDS, Config
from scripts.soak.harness import Soak, run
from scripts.soak.invariants import job_of
from scripts.soak.model import Generation, Invariant, Result

__all__ = ["DRS_FAULTS", "FAULT_KINDS", "Config", "Generation", "Invariant", "Result", "Soak", "job_of", "run"]
