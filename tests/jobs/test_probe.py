"""The probe: explicit zeros when clean, the right counts, workers alive from their heartbeats, the queue gauges
from the queues' counts, a gauge it cannot read left out (never a false 0), nothing at all when its query fails,
and never a change to a job."""

from datetime import timedelta

import pytest
from django.core.management.base import CommandError
from django.db import OperationalError

from jobs import probe, selectors
from jobs.models import JobEvent
from jobs.tasks import probe_task
from tests.jobs.conftest import ago, leased, run, snapshot, waiting

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def a_worker_is_alive(workers_alive, queues, settings):
    """A worker alive on both queues, and an empty maintenance queue, unless a test says otherwise."""
    from jobs.clients import sqs

    client = sqs.client()
    client.delete_queue(QueueUrl=settings.MAINTENANCE_QUEUE_URL)
    sqs.ensure_queues()
    return workers_alive


def emitted(caplog) -> list[dict]:
    return [r.emf for r in caplog.records if r.name == "serenity.metrics" and hasattr(r, "emf")]


def budget(in_flight: int = 0) -> dict:
    """The DRS budget's gauges with no job waiting for a place."""
    from django.conf import settings

    return {
        "DrsInFlight": in_flight,
        "DrsMaxInFlight": settings.DRS_MAX_IN_FLIGHT,
        "JobsWaitingForBudget": 0,
        "OldestBudgetWaitSeconds": 0,
        "DrsBudgetStalled": 0,
    }


def gauges(*, stuck: int, reauth: int, in_flight: int = 0) -> dict:
    """What the probe returns with a worker alive and both queues empty."""
    return {
        "StuckInProgressJobs": stuck,
        "NeedsReauthBacklog": reauth,
        "WorkersAlive": 1,
        **budget(in_flight),
        "JobMessagesWithoutConsumer": 0,
        "MaintenanceQueueDepth": 0,
    }


def metric_line(
    stuck: int,
    reauth: int,
    doc: dict,
    *,
    alive: int = 1,
    without_consumer: int | None = 0,
    maintenance: int | None = 0,
    in_flight: int = 0,
) -> dict:
    """The EMF document the probe must emit, with the emitter's own timestamp (a gauge given as None is absent)."""
    values = {
        "StuckInProgressJobs": stuck,
        "NeedsReauthBacklog": reauth,
        "WorkersAlive": alive,
        **budget(in_flight),
        "JobMessagesWithoutConsumer": without_consumer,
        "MaintenanceQueueDepth": maintenance,
    }
    values = {name: value for name, value in values.items() if value is not None}
    return {
        "_aws": {
            "Timestamp": doc["_aws"]["Timestamp"],
            "CloudWatchMetrics": [
                {
                    "Namespace": "SpacecatSerenityMarketWorker",
                    "Dimensions": [["Environment"]],
                    "Metrics": [
                        {"Name": name, "Unit": "Seconds" if name == "OldestBudgetWaitSeconds" else "Count"}
                        for name in values
                    ],
                }
            ],
        },
        "Environment": "test",
        **values,
    }


def test_probe_emits_explicit_zeros_when_no_job_is_stuck_or_awaiting_reauth(caplog):
    caplog.set_level("INFO")
    waiting(quiet=timedelta(minutes=5), created_at=ago(minutes=5))
    waiting(status="COMPLETED")

    assert probe.run_probe() == gauges(stuck=0, reauth=0)

    (doc,) = emitted(caplog)
    assert doc == metric_line(0, 0, doc)


def test_probe_counts_jobs_by_inactivity_and_the_needs_reauth_backlog(caplog, settings):
    caplog.set_level("INFO")
    quiet = timedelta(seconds=settings.JOB_STUCK_AFTER_SECONDS)
    waiting(quiet=quiet + timedelta(minutes=1), created_at=ago(minutes=40))  # stuck, no lease, soon after creation
    leased(expires_in=timedelta(minutes=5), quiet=quiet + timedelta(minutes=1))  # a lease, but its worker is silent
    waiting(quiet=quiet - timedelta(minutes=1))  # quiet, not yet for long enough
    waiting(quiet=timedelta(minutes=2), created_at=ago(days=2))  # old, but recovered (re-sent) 2 minutes ago
    waiting(status="FAILED", error_code="NEEDS_REAUTH", created_at=ago(days=1))
    waiting(status="FAILED", error_code="NEEDS_REAUTH", created_at=ago(days=8), expires_at=ago(days=1))  # expired
    waiting(status="FAILED", error_code="PROMPT_GENERATION_HELD", created_at=ago(days=1))
    waiting(status="COMPLETED", created_at=ago(days=1))

    assert probe.run_probe() == gauges(stuck=2, reauth=1, in_flight=1)

    (doc,) = emitted(caplog)
    assert doc == metric_line(2, 1, doc, in_flight=1)


def test_the_stuck_threshold_covers_a_lost_lease_and_the_longest_retry_delay(settings):
    assert settings.JOB_LEASE_TTL_SECONDS + min(settings.JOB_RETRY_MAX_SECONDS, 900) <= settings.JOB_STUCK_AFTER_SECONDS


def test_probe_deadline_follows_the_setting(settings, caplog):
    caplog.set_level("INFO")
    settings.JOB_STUCK_AFTER_SECONDS = 600
    waiting(quiet=timedelta(minutes=11))
    waiting(quiet=timedelta(minutes=9))

    assert probe.run_probe() == gauges(stuck=1, reauth=0)


def test_probe_emits_nothing_and_logs_an_error_when_its_query_fails(monkeypatch, caplog):
    caplog.set_level("INFO")

    def broken(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(selectors, "probe_counts", broken)

    assert probe.run_probe() is None

    assert emitted(caplog) == []
    (error,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert (error.name, error.getMessage(), error.reason) == (
        "jobs.probe",
        "job probe query failed; no metrics emitted",
        "OperationalError",
    )


def test_probe_never_changes_a_job():
    waiting(created_at=ago(hours=2))
    leased(expires_in=-timedelta(minutes=5), created_at=ago(hours=2))
    waiting(status="FAILED", error_code="NEEDS_REAUTH")
    before = snapshot()
    events_before = JobEvent.objects.count()

    probe.run_probe()

    assert snapshot() == before
    assert JobEvent.objects.count() == events_before


def test_the_beat_task_runs_the_probe(caplog):
    caplog.set_level("INFO")
    waiting(created_at=ago(hours=2))

    probe_task()

    (doc,) = emitted(caplog)
    assert doc == metric_line(1, 0, doc)


def test_the_probe_command_prints_the_counts_it_emitted(caplog):
    caplog.set_level("INFO")
    waiting(status="FAILED", error_code="NEEDS_REAUTH")

    assert run("job_probe") == [
        "StuckInProgressJobs  0",
        "NeedsReauthBacklog  1",
        "WorkersAlive  1",
        *(f"{name}  {value}" for name, value in budget().items()),
        "JobMessagesWithoutConsumer  0",
        "MaintenanceQueueDepth  0",
    ]
    (doc,) = emitted(caplog)
    assert doc == metric_line(0, 1, doc)


def test_the_probe_command_fails_without_emitting_when_the_query_fails(monkeypatch, caplog):
    caplog.set_level("INFO")
    monkeypatch.setattr(selectors, "probe_counts", lambda **kw: (_ for _ in ()).throw(OperationalError("down")))

    with pytest.raises(CommandError):
        run("job_probe")
    assert emitted(caplog) == []


def test_with_no_worker_alive_the_probe_counts_the_job_messages_nobody_will_take(caplog, settings):
    from jobs.models import WorkerHeartbeat
    from jobs.services import producer
    from jobs.tasks import sweep_unsent_task

    caplog.set_level("INFO")
    WorkerHeartbeat.objects.update(beat_at=ago(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS + 1))
    producer._send(waiting(quiet=timedelta(minutes=1)).id, "testEcho")
    producer._send(
        waiting(quiet=timedelta(minutes=1)).id, "testEcho", delay=60
    )  # a retry waiting out its delay: nobody will take it either
    sweep_unsent_task.apply_async()
    sweep_unsent_task.apply_async()  # the sweeper's messages pile up on the maintenance queue

    assert probe.run_probe() == {
        "StuckInProgressJobs": 0,
        "NeedsReauthBacklog": 0,
        "WorkersAlive": 0,
        **budget(),
        "JobMessagesWithoutConsumer": 2,
        "MaintenanceQueueDepth": 2,
    }

    (doc,) = emitted(caplog)
    assert doc == metric_line(0, 0, doc, alive=0, without_consumer=2, maintenance=2)
    assert "no worker alive on the market-jobs queue" in [r.getMessage() for r in caplog.records]


def test_a_live_worker_makes_waiting_messages_someone_elses_business(caplog):
    from jobs.services import producer

    caplog.set_level("INFO")
    producer._send(waiting().id, "testEcho")

    assert probe.run_probe()["JobMessagesWithoutConsumer"] == 0


def test_when_the_queues_cannot_be_read_their_gauges_are_left_out_never_sent_as_zero(monkeypatch, caplog):
    from jobs.clients import sqs

    caplog.set_level("INFO")

    def unreachable(url):
        raise sqs.AWSError[0]()

    monkeypatch.setattr(sqs, "approximate_counts", unreachable)

    assert probe.run_probe() == {"StuckInProgressJobs": 0, "NeedsReauthBacklog": 0, "WorkersAlive": 1, **budget()}

    (doc,) = emitted(caplog)
    assert doc == metric_line(0, 0, doc, without_consumer=None, maintenance=None)
    output = run("job_probe")
    assert output.code == 1 and "not emitted: the queues could not be read" in output[-1]
