"""The worker's own cost per job (SPEC §5): the SQL one delivery sends beyond its external calls, counted on
the delivery's thread (the simulators answer from other threads, on their own connections), and no database
connection held while DRS works. The fleet's Semrush rate budget costs one statement for the phase's calls (its
reserved slots, markets/clients/semrush_budget.py) and one more per Semrush request beyond them, and the fence against the market's deletion two per Semrush write
request (markets/generation/fence.py): counted apart, exactly, beside the 25."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.outcomes import COMPLETED
from jobs.services.runner import job_run
from markets.clients import semrush_budget
from sandbox.semrush import state as semrush
from tests.markets.generation.test_handler import start_job

# docs/benchmarks.md: the target per job, beyond external calls. `make bench` measures the same in a worker.
MAX_STATEMENTS_PER_JOB = 25


def test_one_delivery_of_a_job_sends_at_most_25_sql_statements_and_small_checkpoints(world, async_on, monkeypatch):
    # A loaded machine can stall a thread past a reserved slot's margin, and a late call moves its reservation (one
    # statement more, tests/markets/clients/test_semrush_budget.py): counted here is a delivery that is never late.
    monkeypatch.setattr(semrush_budget, "LATE_MARGIN_FLOOR_SECONDS", 60.0)
    job, _market = start_job(world)
    calls_before = len(semrush.calls())

    with CaptureQueriesContext(connection) as queries:
        outcome = job_run(job.id, job.job_type, worker="cost")

    job.refresh_from_db()
    assert (outcome, job.status, job.result["promptCount"]) == (COMPLETED, "COMPLETED", job.checkpoints["written"])
    # Transaction control (BEGIN, COMMIT, savepoints) is not counted: it carries no work of its own.
    statements = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].split(" ", 1)[0] not in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
    ]
    # One statement reserves the phase's four calls (tags, prompts read, prompts written, publish); each Semrush
    # request beyond them takes a slot of its own (a fresh workspace has its two tags created), and nothing else.
    slots = [s for s in statements if "semrush_rate_budgets" in s]
    semrush_requests = len(semrush.calls()) - calls_before
    assert len(slots) == 1 + (semrush_requests - 4) and all(
        s.lstrip().startswith("INSERT INTO semrush_rate_budgets") for s in slots
    )
    statements = [s for s in statements if "semrush_rate_budgets" not in s]
    # Two per write request (its record set, then cleared), and nothing else.
    fences = [s for s in statements if s.startswith('UPDATE "markets_market" SET "generation_write_lease"')]
    writes = [c for c in semrush.calls()[calls_before:] if c["method"] != "GET"]
    assert len(fences) == 2 * len(writes) and writes
    statements = [s for s in statements if s not in fences]
    assert len(statements) <= MAX_STATEMENTS_PER_JOB, "\n".join(s[:140] for s in statements)
    # Only the `generated` checkpoint carries the DRS batch; every later one sends its own keys alone.
    batch_writes = [s for s in statements if s.startswith('UPDATE "async_jobs"') and '"batch"' in s]
    assert len(batch_writes) == 1, batch_writes


def test_a_delivery_holds_no_database_connection_while_drs_works(world, async_on, monkeypatch):
    from markets.clients import drs

    job, _market = start_job(world)
    real_generate, seen = drs.generate, []

    def generate(params, **kwargs):
        seen.append(connection.connection is None)  # this thread's connection, as DRS is called
        return real_generate(params, **kwargs)

    monkeypatch.setattr(drs, "generate", generate)

    assert job_run(job.id, job.job_type, worker="cost") == COMPLETED
    assert seen == [True]
