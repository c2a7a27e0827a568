"""The fence between a market's generation and its deletion (markets/generation/fence.py), on PostgreSQL with real
threads: a write passes only for a live delivery of an open market and is recorded while in flight; a delete's hold
and a write's pass are ordered by the market's row; a delete waits for the write the fence let through."""

import threading
import time
from types import SimpleNamespace

import pytest
from django.db import connection, transaction

from jobs.context import JobContext
from jobs.exceptions import JobFailed, LeaseLost
from jobs.leases import lease_claim
from jobs.models import AsyncJob
from jobs.services import job_cancel
from markets.generation import fence
from markets.models import Market
from tests.markets.factories import BrandFactory, GenerationJobFactory, MarketFactory
from tests.waits import wait_until


@pytest.fixture
def running(transactional_db):
    """A market with its project, and a delivery holding its generation job's lease."""
    brand = BrandFactory(semrush_workspace_id="ws-fence")
    market = MarketFactory(brand=brand, semrush_project_id="prj-fence")
    job = GenerationJobFactory(
        organization_id=brand.organization_id, brand_id=brand.id, params={"marketId": str(market.id)}
    )
    return market, JobContext(AsyncJob.objects.get(id=job.id), lease_claim(job.id))


def record(market: Market):
    return Market.objects.filter(id=market.id).values_list("generation_write_lease", "generation_write_until").get()


def test_a_write_of_a_live_delivery_passes_and_is_recorded_until_its_call_returns(running):
    market, ctx = running

    with fence.semrush_write(ctx, timeout=2.0):
        lease, until = record(market)
        assert lease == ctx.lease_token and until is not None

    assert record(market) == (None, None)


def test_a_write_whose_call_fails_is_no_longer_recorded(running):
    market, ctx = running

    with pytest.raises(ConnectionError), fence.semrush_write(ctx, timeout=2.0):
        raise ConnectionError("the call failed")

    assert record(market) == (None, None)


def test_a_write_of_a_cancelled_job_is_refused_as_a_lost_lease(running):
    market, ctx = running
    job_cancel(ctx.id, code="MARKET_DELETED", reason="deleted", actor="u")

    with pytest.raises(LeaseLost), fence.semrush_write(ctx, timeout=2.0):
        pytest.fail("sent")

    assert record(market) == (None, None)


@pytest.mark.parametrize("how", ["held", "gone"])
def test_a_write_to_a_market_held_by_a_delete_or_gone_ends_the_job_market_deleted(running, how):
    market, ctx = running
    if how == "held":
        fence.market_hold(market.id)
    else:
        Market.objects.filter(id=market.id).delete()

    with pytest.raises(JobFailed) as refused, fence.semrush_write(ctx, timeout=2.0):
        pytest.fail("sent")

    assert refused.value.code == "MARKET_DELETED"


def test_a_hold_that_expired_no_longer_closes_the_market(running):
    market, ctx = running
    hold = fence.market_hold(market.id)
    Market.objects.filter(id=market.id).update(deletion_hold_expires_at=market.created_at)

    with fence.semrush_write(ctx, timeout=2.0):
        pass
    assert fence.market_hold(market.id) not in (None, hold)


def test_of_two_holds_one_wins(running):
    market, _ctx = running

    assert fence.market_hold(market.id) is not None
    assert fence.market_hold(market.id) is None


def waiting_for_a_lock() -> bool:
    """Whether some backend of this database waits for a lock another holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND a.datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


def test_a_write_that_meets_a_hold_being_committed_waits_for_it_and_is_refused(running):
    """The hold's transaction is open (the delete cancelling the job in it): the write's fence blocks on the market's
    row and, once the hold commits, reads the hold and is refused. It never passes on what it read before."""
    market, ctx = running
    held, commit, outcome = threading.Event(), threading.Event(), []

    def delete():
        try:
            with transaction.atomic():
                fence.market_hold(market.id)
                held.set()
                commit.wait(30)
        finally:
            connection.close()

    def write():
        try:
            with fence.semrush_write(ctx, timeout=2.0):
                outcome.append("passed")
        except JobFailed as exc:
            outcome.append(exc.code)
        finally:
            connection.close()

    deleter = threading.Thread(target=delete)
    deleter.start()
    assert held.wait(30)
    writer = threading.Thread(target=write)
    writer.start()
    wait_until(waiting_for_a_lock, what="the write's fence waiting on the market's row")
    assert outcome == []  # not decided while the hold is uncommitted
    commit.set()
    deleter.join()
    writer.join()

    assert outcome == ["MARKET_DELETED"]


def test_a_delete_waits_for_the_write_the_fence_let_through(running, monkeypatch):
    """The order a delete relies on: the write passes, the market is held, and the wait for writes in flight ends
    only after the write's call has returned."""
    market, ctx = running
    order, entered, leave = [], threading.Event(), threading.Event()

    def write():
        try:
            with fence.semrush_write(ctx, timeout=5.0):
                entered.set()
                leave.wait(30)
                order.append("write returned")
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    assert entered.wait(30)
    assert fence.market_hold(market.id) is not None
    looks = []

    def look_again(seconds):
        looks.append(seconds)
        if len(looks) == 3:
            leave.set()  # the call returns while the delete is waiting
            writer.join()

    monkeypatch.setattr(fence, "time", SimpleNamespace(monotonic=time.monotonic, sleep=look_again))

    assert fence.writes_drained(market.id, until=time.monotonic() + 30) is True
    order.append("drained")

    assert order == ["write returned", "drained"] and len(looks) >= 3


def test_a_delete_gives_up_waiting_at_its_deadline(running):
    market, ctx = running
    with fence.semrush_write(ctx, timeout=2.0):
        assert fence.writes_drained(market.id, until=time.monotonic()) is False
    assert fence.writes_drained(market.id, until=time.monotonic()) is True
