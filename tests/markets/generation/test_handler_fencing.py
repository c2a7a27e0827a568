"""A worker whose lease was taken over stops before any IMS or Semrush call (SPEC §5.3, §10)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.context import JobContext
from jobs.exceptions import LeaseLost
from jobs.leases import lease_claim
from jobs.models import AsyncJob
from markets.generation.handler import MarketGenerationHandler
from sandbox.ims import ledger
from sandbox.semrush import state as semrush
from tests.markets.generation.test_handler import start_job


@pytest.fixture
def generated_job(world, async_on):
    """A job whose DRS batch is persisted, claimed by a first worker whose lease then expired and was
    taken over by a second one."""
    job, market = start_job(world)
    stale = JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id, worker="first"))
    stale.checkpoint(
        phase="generated", batch={"prompts": [{"prompt": "Welche Schuhe?", "category": ""}], "summary": {}}, batchSize=1
    )
    AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lease_claim(job.id, worker="second") is not None
    return stale, market


def test_a_worker_that_lost_its_lease_neither_exchanges_the_token_nor_writes_to_semrush(generated_job):
    stale, market = generated_job
    with pytest.raises(LeaseLost):
        MarketGenerationHandler().run(stale)
    assert ledger.count(ledger.EXCHANGED) == 0  # the new owner's token was not rotated away
    assert semrush.prompts(market.semrush_project_id) == []
    assert semrush.calls(path_contains=f"{market.semrush_project_id}/prompts", method="POST") == []


def test_a_worker_whose_lease_expired_cannot_write_a_checkpoint(world, async_on):
    job, _ = start_job(world)
    run = JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id))
    AsyncJob.objects.filter(id=job.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(LeaseLost):
        run.checkpoint(phase="generated", batch={"prompts": []})
    assert AsyncJob.objects.get(id=job.id).checkpoints == {}
