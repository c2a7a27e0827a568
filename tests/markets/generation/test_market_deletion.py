"""Deleting a market while its prompts are being generated (SPEC §3.1): a cancellation, never a race.

Through the public API, a real Celery worker on the local SQS, PostgreSQL and the simulators over HTTP, the delete
lands in each phase of a running generation (queued, generating, writing, publishing), from several threads at
once, and before the same slice is created again. Each time, from the Semrush simulator's state and call log:
nothing is written after the delete's 204, the project is deleted once; the job ends once, FAILED MARKET_DELETED,
its history naming who deleted it; no promise token is left live at IMS (its ledger).
"""

import threading

import httpx
import pytest

from jobs.dlq import queue_counts, total
from jobs.models import AsyncJob, JobEvent
from markets.models import Market
from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from sandbox.ims import ledger
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from sandbox.semrush.models import FailureRule
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_until
from tokens.models import PromiseGrant

pytestmark = pytest.mark.worker

PUBLIC_ERROR = {
    "code": "MARKET_DELETED",
    "message": "Prompt generation was cancelled by a request to delete the market.",
    "retryable": False,
    "needsReauth": False,
}


def slice_url(world, market: Market) -> str:
    return world.url(f"markets/{market.geo_target_id}/{market.language_code}")


def delete(world, market: Market) -> int:
    """DELETE the market's slice; the place in Semrush's call log right after its 204."""
    response = world.client.delete(slice_url(world, market))
    assert response.status_code == 204, response.content
    return semrush.last_call_seq()


def writes(calls: list[dict]) -> list[dict]:
    """The calls that change something in Semrush (anything but a read)."""
    return [call for call in calls if call["method"] != "GET"]


def the_project_deleted_once(market: Market) -> dict:
    """The one DELETE of the market's project, answered 204; the project gone from Semrush with its prompts."""
    (deleted,) = semrush.calls(path_contains=f"/ai-projects/{market.semrush_project_id}", method="DELETE")
    assert deleted["status"] == 204
    assert semrush.project(market.semrush_project_id) is None and semrush.prompts(market.semrush_project_id) == []
    return deleted


def assert_cancelled_once(world, job: AsyncJob) -> None:
    """The job ended once, by the delete: FAILED MARKET_DELETED (the UI's "failed"), named in its history, its grant
    gone and no promise token live at IMS."""
    job.refresh_from_db()
    assert (job.status, job.error_code, job.lease_token) == ("FAILED", "MARKET_DELETED", None)
    assert job.error["cancelled"] is True and job.error["retryable"] is False
    poll = world.client.get(world.url(f"markets/generation/jobs/{job.id}"))
    assert poll.status_code == 200 and poll.json()["error"] == PUBLIC_ERROR
    (cancelled,) = JobEvent.objects.filter(job_id=job.id, kind="cancelled")
    assert cancelled.actor == world.user_id and f"deleted by {world.user_id}" in cancelled.detail
    ended = JobEvent.objects.filter(job_id=job.id, kind__in=["completed", "failed", "marked_failed", "cancelled"])
    assert ended.count() == 1
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ledger.live_tokens() == 0


def delivery_stopped(job: AsyncJob) -> None:
    """Wait until the delivery that was running the job has found its lease gone and stopped."""
    wait_until(lambda: JobEvent.objects.filter(job_id=job.id, kind="lease_lost").exists(), what="the delivery to stop")


def stalled(path: str) -> None:
    """Wait until the write stalled on `path` has reached Semrush (the simulator took its stall switch)."""
    wait_until(lambda: FailureRule.objects.filter(path_contains=path, remaining=0).exists(), what=f"{path} in flight")


def test_a_delete_while_the_job_is_queued_cancels_it_and_no_delivery_runs_it(world, async_on, queues, request):
    job, market = start_job(world)  # no worker yet: the job waits in the queue
    assert (job.status, job.phase) == ("IN_PROGRESS", "queued")

    mark = delete(world, market)
    request.getfixturevalue("celery_worker")  # a worker comes up and receives the job's message
    wait_until(lambda: total(queue_counts("queue")["queue"]) == 0, what="the job's message consumed")

    assert_cancelled_once(world, job)
    the_project_deleted_once(market)
    assert semrush.calls(after=mark) == [] and drs.call_count() == 0
    assert ledger.count(ledger.EXCHANGED) == 0
    assert not Market.objects.filter(id=market.id).exists()


def test_a_delete_while_drs_generates_discards_its_result(world, async_on, celery_worker):
    drs_controls.set_latency(2000)
    job, market = start_job(world)
    wait_until(lambda: drs.call_count() == 1, what="the DRS call in flight")

    mark = delete(world, market)
    assert_cancelled_once(world, job)  # at once: the delete does not wait for DRS
    delivery_stopped(job)

    job.refresh_from_db()
    assert "batch" not in job.checkpoints  # the DRS result was discarded
    assert semrush.calls(after=mark) == [] and drs.call_count() == 1
    assert ledger.count(ledger.EXCHANGED) == 0  # the token was never exchanged
    the_project_deleted_once(market)
    assert ledger.live_tokens() == 0


def test_a_delete_while_prompts_are_written_waits_for_the_write_in_flight_then_nothing_more_is_written(
    world, async_on, celery_worker
):
    semrush_controls.fail_next(1, path="/prompts", method="POST", stall_ms=1500)
    job, market = start_job(world)
    stalled("/prompts")  # a batch of prompts is on its way into the project

    mark = delete(world, market)
    assert_cancelled_once(world, job)
    delivery_stopped(job)

    (written,) = semrush.calls(path_contains=f"/ai-projects/{market.semrush_project_id}/prompts", method="POST")
    deleted = the_project_deleted_once(market)
    log = semrush.calls()
    # The write the fence let through landed before the project was deleted, and went with it.
    assert written["status"] == 201 and log.index(written) < log.index(deleted)
    assert writes(semrush.calls(after=mark)) == []
    job.refresh_from_db()
    assert "written" not in job.checkpoints and job.phase == "writing"


def test_a_delete_while_the_project_is_published_leaves_nothing_published(world, async_on, celery_worker):
    drs_controls.set_latency(1000)  # time to set the stall below after the market's own publish
    job, market = start_job(world)
    semrush_controls.fail_next(1, path="/publish", method="POST", stall_ms=1500)
    stalled("/publish")  # the job's publish

    mark = delete(world, market)
    assert_cancelled_once(world, job)
    delivery_stopped(job)

    published = semrush.calls(path_contains=f"/ai-projects/{market.semrush_project_id}/publish", method="POST")
    log = semrush.calls()
    deleted = the_project_deleted_once(market)
    assert [log.index(call) < log.index(deleted) for call in published] == [True, True]
    assert writes(semrush.calls(after=mark)) == []
    job.refresh_from_db()
    assert job.status == "FAILED" and job.result is None


def test_concurrent_deletes_of_one_slice_delete_the_project_once_and_end_the_job_once(
    world, async_on, celery_worker, sims
):
    drs_controls.set_latency(1500)
    job, market = start_job(world)
    wait_until(lambda: drs.call_count() == 1, what="the DRS call in flight")
    start = threading.Barrier(4)
    answers: list[int] = []

    def delete_from_a_thread():
        with httpx.Client(base_url=sims.url, headers={"Authorization": f"Bearer {world.token}"}, timeout=60) as client:
            start.wait()
            answers.append(client.delete(slice_url(world, market)).status_code)

    threads = [threading.Thread(target=delete_from_a_thread) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    mark = semrush.last_call_seq()
    delivery_stopped(job)

    assert answers == [204, 204, 204, 204]
    assert len(semrush.calls(method="DELETE")) == 1
    the_project_deleted_once(market)
    assert_cancelled_once(world, job)
    assert writes(semrush.calls(after=mark)) == []
    assert not Market.objects.filter(brand=world.brand).exists()


def test_a_slice_deleted_and_created_again_gets_a_new_generation_the_old_one_touches_nothing_of(
    world, async_on, celery_worker
):
    drs_controls.set_latency(1500)
    old_job, old_market = start_job(world)
    wait_until(lambda: drs.call_count() == 1, what="the old job's DRS call in flight")

    mark = delete(world, old_market)
    new_job, new_market = start_job(world)  # the same slice: the same deterministic job id

    assert new_job.id == old_job.id and new_market.id != old_market.id
    assert new_market.semrush_project_id != old_market.semrush_project_id
    delivery_stopped(old_job)
    new_job.refresh_from_db()
    wait_until(lambda: AsyncJob.objects.filter(id=new_job.id, status="COMPLETED").exists(), timeout=60)
    new_job.refresh_from_db()

    assert new_job.result["projectId"] == new_market.semrush_project_id
    written = semrush.prompts(new_market.semrush_project_id)
    assert len(written) == new_job.result["promptCount"] == 50
    assert semrush.project(new_market.semrush_project_id)["published"] is True
    assert drs.call_count() == 2  # the old generation's call (discarded) and the new one's
    the_project_deleted_once(old_market)
    assert semrush.calls(path_contains=old_market.semrush_project_id, after=mark) == []
    kinds = list(JobEvent.objects.filter(job_id=new_job.id).values_list("kind", flat=True))
    assert kinds.index("cancelled") < kinds.index("replaced") < kinds.index("completed")
    wait_until(lambda: ledger.live_tokens() == 0, timeout=10)


def test_a_slice_created_again_without_generation_shows_no_handle_of_the_deleted_markets_job(world, async_on, queues):
    old_job, old_market = start_job(world)  # queued: no worker runs it
    delete(world, old_market)
    fields = {**world.brand_fields, "market": "DE", "languageCode": "de"}
    created = world.post(world.url("markets"), {**fields, "generatePrompts": False})
    assert created.status_code == 201, created.content
    new_market_id = created.json()["id"]

    again = world.post(world.url("markets"), {**fields, "generatePrompts": False})

    # The slice's deterministic job id still holds the deleted market's cancelled job: the 409 names the live market
    # and no generation of its own, never the old market's FAILED job as if it were this one's.
    assert again.status_code == 409, again.content
    assert again.json()["marketId"] == new_market_id != str(old_market.id)
    assert "promptGeneration" not in again.json()
    assert AsyncJob.objects.filter(id=old_job.id, status="FAILED", error_code="MARKET_DELETED").exists()
