"""The on-call operator's incidents, with real workers, the local SQS and PostgreSQL: a job that keeps
killing workers, a worker killed mid-job, no worker at all, and a Semrush outage that outlasts a job's
retries. Each time the tools report what happened and never make it worse."""

import json
import os
import signal
from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.urls import reverse
from django.utils import timezone

from jobs.models import AsyncJob
from jobs.services import doctor
from sandbox.drs import controls as drs_controls
from sandbox.drs import state as drs
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from serenity.celery import app
from tests.jobs.conftest import dlq_job_ids, run
from tests.markets.generation.test_handler import start_job
from tests.markets.test_worker_crash import KILLED_FAST, crash_worker
from tests.markets.test_worker_faults import wait_for_phase, worker_process
from tests.waits import wait_terminal, wait_until

pytestmark = pytest.mark.worker


def only(lines, kind) -> list[str]:
    return [line for line in lines if f"  {kind}  " in line]


def test_a_crash_loop_job_in_the_dlq_is_never_re_sent_by_the_doctor_and_the_redrive_completes_it(
    world, async_on, queues
):
    job, market = start_job(world)
    client = queues.sqs.client()
    dlq_arn = client.get_queue_attributes(QueueUrl=queues.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    client.set_queue_attributes(
        QueueUrl=queues.url,
        Attributes={
            "VisibilityTimeout": "4",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"}),
        },
    )
    for _ in range(2):  # each worker receives the message, claims the job and dies
        assert crash_worker("after_claim", timeouts=KILLED_FAST) == -9

    def dead_lettered_and_expired():
        # Once the second receive's hold runs out, the next receive moves the message to the DLQ; the lease the
        # second worker left runs out about then too.
        assert queues.drain() == []
        job.refresh_from_db()
        return queues.sqs.approximate_counts(queues.dlq_url)["Visible"] == 1 and job.lease_state() == "expired"

    wait_until(dead_lettered_and_expired, timeout=30, what="the message in the DLQ and the lease run out")
    job.refresh_from_db()
    assert job.lease_state() == "expired"  # both: its message is in the DLQ and its lease has run out

    output = run("doctor", "--apply")

    (line,) = only(output, doctor.DLQ_MESSAGE_FOR_WAITING_JOB)
    assert line.startswith(str(job.id)) and f"job_redrive_dlq --job {job.id} --apply" in line
    assert output.code == 1
    assert queues.drain(delete=False) == []  # nothing re-sent
    assert run("doctor").code == 1 and only(run("doctor"), doctor.DLQ_MESSAGE_FOR_WAITING_JOB)  # still reported

    redriven = run("job_redrive_dlq", "--job", str(job.id), "--apply")
    assert redriven[0].startswith(f"{job.id}  re-send") and redriven[0].endswith("[done]") and redriven.code == 0
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"):
        job = wait_terminal(job, timeout=30)

    assert job.status == "COMPLETED", job.error
    assert len(semrush.prompts(market.semrush_project_id)) == 50
    assert dlq_job_ids() == []


def test_a_worker_killed_mid_job_is_reported_presumed_dead_once_it_misses_three_heartbeats(
    world, async_on, queues, settings
):
    settings.JOB_HEARTBEAT_SECONDS = 1
    drs_controls.set_latency(8000, remaining=1)  # the worker sits in the DRS call, beating every second
    job, _ = start_job(world)
    worker = worker_process({"JOB_HEARTBEAT_SECONDS": 1})
    try:
        wait_for_phase(job, "generating", timeout=30)
        beating_since = job.updated_at

        def beat_after_three_heartbeats():
            # A beat more than three heartbeats into the DRS call: a live worker keeps the job fresh.
            job.refresh_from_db()
            return job.updated_at >= beating_since + timedelta(seconds=3.5)

        wait_until(beat_after_three_heartbeats, timeout=20, what="a heartbeat three heartbeats into the call")
        assert not only(run("doctor"), doctor.WORKER_PRESUMED_DEAD)
        os.kill(worker.pid, signal.SIGKILL)
        found = wait_until(lambda: only(run("doctor"), doctor.WORKER_PRESUMED_DEAD), timeout=20)
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()

    (line,) = found
    assert line.startswith(str(job.id)) and "phase generating" in line
    job.refresh_from_db()
    assert job.lease_state() == "held"  # the lease still runs: only the silence gives the worker away


def test_with_no_worker_alive_beat_still_reports_the_inactive_job(world, async_on, queues, settings, metric_lines):
    import jobs.tasks  # noqa: F401  (registers the tasks, as `celery beat` does when it starts)
    from serenity.beat import Scheduler

    settings.JOB_STUCK_AFTER_SECONDS = 2
    job, _ = start_job(world)  # its message waits: no worker runs anywhere
    quiet_since = timezone.now() - timedelta(seconds=3)  # longer ago than JOB_STUCK_AFTER_SECONDS
    AsyncJob.objects.filter(id=job.id).update(updated_at=quiet_since, message_sent_at=quiet_since)
    scheduler = Scheduler(app=app, lazy=False)

    scheduler.apply_async(scheduler.schedule["probe-stuck-jobs"])

    (doc,) = [d for d in metric_lines if "StuckInProgressJobs" in d]
    assert doc["StuckInProgressJobs"] == 1
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(job.id)]  # the probe did not use the queue


def test_an_operator_re_runs_a_job_failed_in_a_semrush_outage_from_the_admin_to_completed(
    world, async_on, celery_worker, settings, admin_client, metric_lines
):
    settings.JOB_RETRY_BASE_SECONDS, settings.JOB_MAX_ATTEMPTS = 1, 2
    semrush_controls.fail_next(100, status=503, path="/prompts")
    job, market = start_job(world)
    job = wait_terminal(job, timeout=45)
    assert (job.status, job.error_code) == ("FAILED", "RETRIES_EXHAUSTED")
    history = " ".join(job.events.values_list("detail", flat=True))
    assert "HTTP 503" in history  # what the outage answered, not just "TransientError"
    failed = [d for d in metric_lines if "JobsFailed" in d]
    assert [(d["ErrorCode"], d["JobsFailed"]) for d in failed] == [("RETRIES_EXHAUSTED", 1)]
    assert sum(d["SemrushCallFailure"] for d in metric_lines if "SemrushCallFailure" in d) >= 2

    semrush_controls.reset(data=False)  # the outage is over
    admin_client.post(
        reverse("admin:jobs_asyncjob_changelist"),
        {"action": "rerun", "_selected_action": [str(job.id)], "confirmed": "yes"},
    )
    job = wait_terminal(job, timeout=30)

    assert job.status == "COMPLETED", job.error
    assert drs.call_count() == 1
    assert len(semrush.prompts(market.semrush_project_id)) == 50
    assert job.events.get(kind="rerun").actor == "admin:admin"
    assert AsyncJob.objects.get(id=job.id).error is None
