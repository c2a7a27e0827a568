"""The stuck-jobs probe: explicit zeros when clean, the right counts, nothing at all when its query
fails, and never a change to a job."""
from datetime import timedelta

import pytest
from django.core.management.base import CommandError
from django.db import OperationalError

from jobs import probe, selectors
from jobs.models import JobEvent
from jobs.tasks import probe_task
from tests.jobs.conftest import ago, leased, run, snapshot, waiting

pytestmark = pytest.mark.django_db


def emitted(caplog) -> list[dict]:
    return [r.emf for r in caplog.records if r.name == "serenity.metrics" and hasattr(r, "emf")]


def metric_line(stuck: int, reauth: int, doc: dict) -> dict:
    """The EMF document the probe must emit, with the emitter's own timestamp."""
    return {
        "_aws": {
            "Timestamp": doc["_aws"]["Timestamp"],
            "CloudWatchMetrics": [{
                "Namespace": "SpacecatSerenityMarketWorker",
                "Dimensions": [["Environment"]],
                "Metrics": [{"Name": "StuckInProgressJobs", "Unit": "Count"},
                            {"Name": "NeedsReauthBacklog", "Unit": "Count"}],
            }],
        },
        "Environment": "test",
        "StuckInProgressJobs": stuck,
        "NeedsReauthBacklog": reauth,
    }


def test_probe_emits_explicit_zeros_when_no_job_is_stuck_or_awaiting_reauth(caplog):
    caplog.set_level("INFO")
    waiting(quiet=timedelta(minutes=5), created_at=ago(minutes=5))
    waiting(status="COMPLETED")

    assert probe.run_probe() == {"StuckInProgressJobs": 0, "NeedsReauthBacklog": 0}

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

    assert probe.run_probe() == {"StuckInProgressJobs": 2, "NeedsReauthBacklog": 1}

    (doc,) = emitted(caplog)
    assert doc == metric_line(2, 1, doc)


def test_the_stuck_threshold_covers_a_lost_lease_and_the_longest_retry_delay(settings):
    assert settings.JOB_LEASE_TTL_SECONDS + min(settings.JOB_RETRY_MAX_SECONDS, 900) <= settings.JOB_STUCK_AFTER_SECONDS


def test_probe_deadline_follows_the_setting(settings, caplog):
    caplog.set_level("INFO")
    settings.JOB_STUCK_AFTER_SECONDS = 600
    waiting(quiet=timedelta(minutes=11))
    waiting(quiet=timedelta(minutes=9))

    assert probe.run_probe() == {"StuckInProgressJobs": 1, "NeedsReauthBacklog": 0}


def test_probe_emits_nothing_and_logs_an_error_when_its_query_fails(monkeypatch, caplog):
    caplog.set_level("INFO")

    def broken(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(selectors, "probe_counts", broken)

    assert probe.run_probe() is None

    assert emitted(caplog) == []
    (error,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert (error.name, error.getMessage(), error.reason) == (
        "jobs.probe", "job probe query failed; no metrics emitted", "OperationalError")


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

    assert run("job_probe") == ["StuckInProgressJobs  0", "NeedsReauthBacklog  1"]
    (doc,) = emitted(caplog)
    assert doc == metric_line(0, 1, doc)


def test_the_probe_command_fails_without_emitting_when_the_query_fails(monkeypatch, caplog):
    caplog.set_level("INFO")
    monkeypatch.setattr(selectors, "probe_counts", lambda **kw: (_ for _ in ()).throw(OperationalError("down")))

    with pytest.raises(CommandError):
        run("job_probe")
    assert emitted(caplog) == []
