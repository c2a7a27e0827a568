"""The fleet's Semrush budget spent on work, not on repeats (docs/worker.md "The Semrush budget"): with more
deliveries waiting to write than the budget serves in a few seconds, each job still makes exactly the calls an
unthrottled delivery makes, and none is handed back for a slot: a delivery reserves its phase's calls at once and
waits for its turn in place, then sends them one slot after another."""

from collections import Counter

import pytest
from celery.contrib.testing.worker import start_worker

from jobs.models import AsyncJob
from markets import geo
from markets.clients.semrush import SemrushClient
from sandbox.semrush import state as semrush
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_until

pytestmark = pytest.mark.worker

BUDGET = 4  # Semrush calls a second, the whole fleet
JOBS = 24  # at four calls each: 24 s of the budget, six of them queued at once for every slot in the next second


def test_under_a_binding_budget_every_job_makes_the_calls_of_an_unthrottled_delivery_and_is_never_handed_back(
    world, async_on, settings, queues
):
    from serenity.celery import app

    # The workspace has its tags, as every brand's has after its first job: a delivery then reads the tags, reads
    # the project's prompts, writes the missing ones and publishes, four calls.
    SemrushClient(world.token).ensure_tags(
        workspace_id=world.brand.semrush_workspace_id, wanted={"source": ["semrush"], "origin": ["ai"]}
    )
    jobs = [start_job(world, market=code, language="en")[0] for code in list(geo.COUNTRY_CODES)[:JOBS]]
    before = semrush.last_call_seq()
    settings.SEMRUSH_MAX_CALLS_PER_SECOND = BUDGET
    settings.JOB_FAIR_HOLD_SECONDS = 1

    # As many threads as jobs: every delivery reaches its Semrush phase at once, and the slots of the first
    # calls alone reach six seconds ahead, beyond what a call waits for in place.
    with start_worker(
        app, pool="threads", concurrency=JOBS, perform_ping_check=False, loglevel="WARNING", shutdown_timeout=60
    ):
        wait_until(
            lambda: not AsyncJob.objects.filter(id__in=[j.id for j in jobs], status="IN_PROGRESS").exists(),
            timeout=600,
            what="every job ended",
        )

    ended = AsyncJob.objects.filter(id__in=[j.id for j in jobs])
    assert Counter(ended.values_list("status", flat=True)) == {"COMPLETED": JOBS}
    calls = semrush.calls(after=before)
    kinds = Counter(f"{c['method']} {c['path'].rsplit('/', 1)[-1]}" for c in calls)
    assert kinds == {"GET tags": JOBS, "GET prompts": JOBS, "POST prompts": JOBS, "POST publish": JOBS}, kinds
    assert not [c for c in calls if c["status"] == 429]
    # Never handed back for a slot, never an attempt spent.
    assert sorted(ended.values_list("throttles", "attempts").distinct()) == [(0, 1)]
