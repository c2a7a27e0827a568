"""Runbook commands through call_command on PostgreSQL and the local SQS: dry run changes nothing,
--apply does what the dry run printed, a second run finds nothing to do, bad input is refused."""

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management.base import CommandError
from django.utils import timezone

from jobs.models import AsyncJob, JobEvent
from tests.jobs.conftest import (
    KNOWN_TOKEN,
    ago,
    dlq_job_ids,
    leased,
    lines_about,
    plant,
    run,
    scheduled_task_to_dlq,
    snapshot,
    store_grant,
    to_dlq,
    waiting,
)
from tokens.models import PromiseGrant

pytestmark = pytest.mark.django_db


def events(job, kind):
    return list(JobEvent.objects.filter(job_id=job.id, kind=kind).values_list("kind", "actor", "detail"))


# --- job_release_leases ----------------------------------------------------------------------------------


def test_release_leases_dry_run_lists_expired_leases_and_changes_nothing():
    stale = leased(expires_in=-timedelta(minutes=5))
    live = leased(expires_in=timedelta(minutes=5))
    before = snapshot()

    lines = run("job_release_leases")

    assert len(lines_about(lines, stale)) == 1
    assert "release stale lease" in lines_about(lines, stale)[0]
    assert lines_about(lines, stale)[0].endswith("[dry run]")
    assert lines_about(lines, live) == []
    assert lines[-1] == "1 stale leases found. Dry run: nothing changed; re-run with --apply to act."
    assert snapshot() == before


def test_release_leases_apply_releases_exactly_what_the_dry_run_printed_and_a_second_run_finds_nothing():
    stale = leased(expires_in=-timedelta(minutes=5))
    live = leased(expires_in=timedelta(minutes=5))
    printed = [line.removesuffix("  [dry run]") for line in run("job_release_leases")[:-1]]

    applied = run("job_release_leases", "--apply")

    assert [line.removesuffix("  [done]") for line in applied[:-1]] == printed
    assert applied[-1] == "1 of 1 stale leases released; 0 skipped."
    stale.refresh_from_db()
    live.refresh_from_db()
    assert (stale.status, stale.lease_token, stale.lease_expires_at) == ("IN_PROGRESS", None, None)
    assert live.lease_token is not None
    ((_kind, actor, detail),) = events(stale, "lease_released")
    assert actor.startswith("cli:") and detail == "stale lease released"
    assert run("job_release_leases", "--apply") == ["No stale leases found: nothing to do."]


def test_release_leases_older_than_and_job_narrow_the_selection():
    recent = leased(expires_in=-timedelta(minutes=5))
    old = leased(expires_in=-timedelta(hours=3))

    assert [line.split()[0] for line in run("job_release_leases", "--older-than", "1h")[:-1]] == [str(old.id)]
    assert [line.split()[0] for line in run("job_release_leases", "--job", str(recent.id))[:-1]] == [str(recent.id)]


@pytest.mark.parametrize("args", [["--older-than", "soon"], ["--older-than", "5w"], ["--job", "not-a-uuid"]])
def test_release_leases_refuses_bad_input(args):
    with pytest.raises(CommandError):
        run("job_release_leases", *args)


# --- job_requeue_stuck -----------------------------------------------------------------------------------


def test_requeue_stuck_dry_run_lists_only_quiet_jobs_without_a_live_lease_and_sends_nothing(queues):
    stuck = waiting(quiet=timedelta(hours=2))
    expired = leased(expires_in=-timedelta(hours=2), quiet=timedelta(hours=2))
    live = leased(expires_in=timedelta(minutes=10), quiet=timedelta(hours=2))
    recent = waiting(quiet=timedelta(minutes=5))
    done = waiting(quiet=timedelta(hours=2), status="COMPLETED")
    before = snapshot()

    lines = run("job_requeue_stuck")

    assert {line.split()[0] for line in lines[:-1]} == {str(stuck.id), str(expired.id)}
    assert all(line.endswith("[dry run]") for line in lines[:-1])
    assert lines_about(lines, live) == lines_about(lines, recent) == lines_about(lines, done) == []
    assert lines[-1] == "2 stuck jobs found. Dry run: nothing changed; re-run with --apply to act."
    assert snapshot() == before
    assert queues.drain() == []


def test_requeue_stuck_apply_sends_one_fresh_message_per_listed_job_and_a_second_run_finds_nothing(queues):
    stuck = waiting(quiet=timedelta(hours=2))
    live = leased(expires_in=timedelta(minutes=10), quiet=timedelta(hours=2))

    lines = run("job_requeue_stuck", "--apply")

    assert len(lines) == 2 and lines[0].startswith(f"{stuck.id}  re-enqueue") and lines[0].endswith("[done]")
    assert lines[1] == "1 of 1 stuck jobs re-enqueued; 0 skipped."
    stuck.refresh_from_db()
    assert stuck.message_sent_at > ago(minutes=1)
    assert [e[0] for e in events(stuck, "requeued")] == ["requeued"]
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(stuck.id), "type": "testEcho"}]
    assert not AsyncJob.objects.filter(id=live.id, message_sent_at__gt=ago(minutes=1)).exists()
    assert run("job_requeue_stuck", "--apply") == ["No stuck jobs found: nothing to do."]


def test_runbook_exit_codes_say_whether_a_human_is_needed(queues):
    assert run("job_requeue_stuck").code == 0  # nothing found
    stuck = waiting(quiet=timedelta(hours=2))
    assert run("job_requeue_stuck").code == 1  # a dry run found work
    assert run("job_requeue_stuck", "--apply").code == 0  # all of it done
    assert run("job_requeue_stuck", "--apply").code == 0  # and nothing left
    assert run("job_mark_failed", "--job", str(uuid.uuid4()), "--reason", "x", "--apply").code == 1  # no such job
    AsyncJob.objects.filter(id=stuck.id).update(status="COMPLETED")
    assert run("job_mark_failed", "--job", str(stuck.id), "--reason", "x", "--apply").code == 0  # already over


def test_a_usage_error_exits_2_and_an_unreachable_database_is_one_line_not_a_traceback():
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:9/serenity",
        "DB_CONNECT_TIMEOUT_SECONDS": "2",
    }

    def manage(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60
        )

    usage = manage("job_requeue_stuck", "--older-than", "soon")
    down = manage("doctor")

    assert usage.returncode == 2 and "--older-than must look like 45s" in usage.stderr
    assert down.returncode == 1 and "Traceback" not in down.stderr
    assert down.stderr.strip().splitlines() == [down.stderr.strip()]
    assert down.stderr.startswith("doctor: the database cannot be reached or answered an error (OperationalError: ")


def test_requeue_stuck_honours_older_than():
    job = waiting(quiet=timedelta(minutes=20))

    assert run("job_requeue_stuck") == ["No stuck jobs found: nothing to do."]
    assert run("job_requeue_stuck", "--older-than", "15m")[0].startswith(str(job.id))


# --- job_redrive_dlq ---------------------------------------------------------------------------------------


@pytest.fixture
def dead_letters(queues):
    """One DLQ message per case the redrive must tell apart."""
    jobs = {
        "waiting": waiting(),
        "expired": leased(expires_in=-timedelta(minutes=30)),
        "live": leased(expires_in=timedelta(minutes=10)),
        "completed": waiting(status="COMPLETED"),
        "failed": waiting(status="FAILED", error_code="NEEDS_REAUTH"),
    }
    missing = uuid.uuid4()
    for job in jobs.values():
        to_dlq(job.id)
    to_dlq(missing)
    from jobs.clients import sqs

    sqs.send_raw(settings.MARKET_JOBS_DLQ_URL, "not a celery message")
    return jobs, missing


def verdicts(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        subject, _, rest = line.partition("  ")
        out[subject] = rest.split("  ")[0]
    return out


def test_redrive_dry_run_decides_per_message_and_leaves_the_dlq_and_the_jobs_as_they_were(dead_letters, queues):
    jobs, missing = dead_letters
    before = snapshot()

    lines = run("job_redrive_dlq")

    decided = verdicts(lines[:-2])
    assert {k: v for k, v in decided.items() if not k.startswith("message ")} == {
        str(jobs["waiting"].id): "re-send",
        str(jobs["expired"].id): "re-send",
        str(jobs["live"].id): "keep in DLQ",
        str(jobs["completed"].id): "drop",
        str(jobs["failed"].id): "drop",
        str(missing): "drop",
    }
    assert [v for k, v in decided.items() if k.startswith("message ")] == ["keep in DLQ"]
    assert lines[-2] == "5 DLQ messages to re-send or drop found. Dry run: nothing changed; re-run with --apply to act."
    assert lines[-1] == "2 message(s) left in the DLQ: 2 kept (see the 'keep in DLQ' and skipped lines)."
    assert snapshot() == before
    assert queues.drain() == []
    assert len(dlq_job_ids()) == 7


def test_redrive_apply_resends_only_eligible_jobs_drops_the_rest_and_a_second_run_finds_nothing(dead_letters, queues):
    jobs, _missing = dead_letters
    printed = verdicts(run("job_redrive_dlq")[:-2])

    lines = run("job_redrive_dlq", "--apply")

    assert verdicts(lines[:-2]) == printed
    assert all(line.endswith("[done]") for line in lines[:-2] if "keep in DLQ" not in line)
    assert lines[-2] == "5 of 5 DLQ messages to re-send or drop handled; 0 skipped."
    sent = sorted(m["kwargs"]["jobId"] for m in queues.drain())
    assert sent == sorted([str(jobs["waiting"].id), str(jobs["expired"].id)])
    for name in ("waiting", "expired"):
        ((_kind, actor, _),) = events(jobs[name], "redriven")
        assert actor.startswith("cli:")
    for name in ("completed", "failed"):
        ((_, _, detail),) = events(jobs[name], "dlq_message_dropped")
        assert detail == f"job is {jobs[name].status}"
    assert AsyncJob.objects.get(id=jobs["completed"].id).status == "COMPLETED"
    assert AsyncJob.objects.get(id=jobs["live"].id).message_sent_at == jobs["live"].message_sent_at

    again = run("job_redrive_dlq", "--apply")

    assert again[-2] == "No DLQ messages to re-send or drop found: nothing to do."
    assert queues.drain() == []
    left = dlq_job_ids()
    assert len(left) == 2 and set(left) == {str(jobs["live"].id), None}


def test_redrive_resends_a_job_once_when_the_dlq_holds_several_of_its_messages(queues):
    job = waiting()
    to_dlq(job.id)
    to_dlq(job.id)

    lines = run("job_redrive_dlq", "--apply")

    assert [line.split("  ")[:2] for line in lines[:-1]] == [[str(job.id), "re-send"], [str(job.id), "drop"]]
    assert "duplicate of a message already re-sent" in lines[1]
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(job.id)]
    assert dlq_job_ids() == []


def test_a_scheduled_tasks_message_is_listed_by_its_task_kept_by_default_and_dropped_on_request(queues):
    from jobs.tasks import probe_task

    message_id = scheduled_task_to_dlq(probe_task)
    subject = f"message {message_id} (jobs.probe)"

    kept = run("job_redrive_dlq", "--apply")
    dry = run("job_redrive_dlq", "--drop-other-tasks")
    dropped = run("job_redrive_dlq", "--drop-other-tasks", "--apply")

    assert verdicts(kept[:1]) == {subject: "keep in DLQ"} and "--only-other-tasks drops such messages alone" in kept[0]
    assert kept.code == 1  # the DLQ still holds a message: someone must look
    assert verdicts(dry[:1]) == {subject: "drop"} and dry[0].endswith("[dry run]") and dry.code == 1
    assert verdicts(dropped[:1]) == {subject: "drop"} and dropped[0].endswith("[done]") and dropped.code == 0
    assert dlq_job_ids() == []
    assert run("job_redrive_dlq", "--drop-other-tasks", "--apply").code == 0


def test_redrive_with_job_touches_only_that_jobs_messages(queues):
    chosen, other = waiting(), waiting(status="COMPLETED")
    to_dlq(chosen.id)
    to_dlq(other.id)

    lines = run("job_redrive_dlq", "--job", str(chosen.id), "--apply")

    assert [line.split()[0] for line in lines[:-2]] == [str(chosen.id)]
    assert lines[-1] == "1 message(s) left in the DLQ: 1 not selected: outside --job/--status/--code."
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(chosen.id)]
    assert dlq_job_ids() == [str(other.id)]


def test_only_other_tasks_drops_the_messages_that_are_not_job_messages_and_no_job_message(queues):
    from jobs.clients import sqs
    from jobs.tasks import sweep_unsent_task

    resendable, finished = waiting(), waiting(status="COMPLETED")
    looping = leased(expires_in=-timedelta(minutes=5), attempts=2, lost_deliveries=1)
    for job in (resendable, finished, looping):
        to_dlq(job.id)
    task_message = scheduled_task_to_dlq(sweep_unsent_task)
    sqs.send_raw(settings.MARKET_JOBS_DLQ_URL, "not a celery message")
    before = snapshot()

    output = run("job_redrive_dlq", "--only-other-tasks", "--apply")

    assert {subject: verdict for subject, verdict in verdicts(output[:2]).items()} == {
        f"message {task_message} (jobs.sweep_unsent)": "drop"
    } | {subject: "drop" for subject in verdicts(output[:2]) if subject.endswith("(not a Celery message)")}
    assert all(line.endswith("[done]") for line in output[:2])
    assert output[-2] == "2 of 2 DLQ messages to re-send or drop handled; 0 skipped."
    assert output[-1] == (
        "3 message(s) left in the DLQ: 3 not selected: job messages (--only-other-tasks drops "
        "the other messages alone)."
    )
    assert output.code == 1  # job messages remain: they need an operator
    assert queues.drain() == []  # nothing re-sent, the crash-looping job least of all
    assert snapshot() == before
    assert sorted(dlq_job_ids()) == sorted(str(j.id) for j in (resendable, finished, looping))


def test_only_other_tasks_takes_no_job_filter():
    with pytest.raises(CommandError) as refused:
        run("job_redrive_dlq", "--only-other-tasks", "--job", str(uuid.uuid4()))
    assert refused.value.returncode == 2


def test_a_redrive_never_re_sends_a_job_whose_deliveries_keep_dying_unless_it_is_named(queues):
    looping = leased(expires_in=-timedelta(minutes=5), attempts=2, lost_deliveries=1)
    to_dlq(looping.id)

    unnamed = run("job_redrive_dlq", "--apply")

    (line,) = lines_about(unnamed, looping)
    assert f"{looping.id}  keep in DLQ  its last 2 deliveries died without an outcome (a crash loop)" in line
    assert f"re-sent only when named with --job {looping.id}" in line
    assert unnamed.code == 1 and queues.drain() == []

    named = run("job_redrive_dlq", "--job", str(looping.id), "--apply")

    assert lines_about(named, looping)[0].startswith(f"{looping.id}  re-send") and named.code == 0
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(looping.id)]
    assert dlq_job_ids() == []


def test_a_filtered_redrive_says_how_many_messages_it_left_and_why_and_exits_1(queues):
    chosen, other = waiting(), waiting()
    to_dlq(chosen.id)
    to_dlq(other.id)
    to_dlq(other.id)

    output = run("job_redrive_dlq", "--job", str(chosen.id), "--apply")

    assert lines_about(output, chosen)[0].endswith("[done]")
    assert output[-1] == "2 message(s) left in the DLQ: 2 not selected: outside --job/--status/--code."
    assert output.code == 1
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(chosen.id)]
    assert dlq_job_ids() == [str(other.id), str(other.id)]


def test_a_redrive_that_cannot_read_what_another_reader_holds_says_so_and_exits_1(queues):
    from jobs.dlq import DlqScan

    job = waiting(status="COMPLETED")
    to_dlq(job.id)
    with DlqScan(hold_seconds=60):  # another redrive, a doctor or job_inspect holds the DLQ's message
        output = run("job_redrive_dlq", "--apply")

    assert output == [
        "No DLQ messages to re-send or drop found: nothing to do.",
        "1 message(s) left in the DLQ: 1 held by another reader, not read (run it again in a minute).",
    ]
    assert output.code == 1
    assert dlq_job_ids() == [str(job.id)]


# --- job_mark_failed -------------------------------------------------------------------------------------


def test_mark_failed_dry_run_changes_nothing(ims_invalidations):
    job = waiting()
    store_grant(job)
    before = snapshot()

    lines = run("job_mark_failed", "--job", str(job.id), "--reason", "market removed")

    assert lines[0].startswith(f"{job.id}  mark FAILED OPERATOR_FAILED") and lines[0].endswith("[dry run]")
    assert snapshot() == before
    assert PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == []


def test_mark_failed_apply_fails_the_job_invalidates_its_token_deletes_its_grant_and_is_safe_twice(ims_invalidations):
    job = waiting()
    store_grant(job)

    lines = run(
        "job_mark_failed", "--job", str(job.id), "--code", "MARKET_REMOVED", "--reason", "market removed", "--apply"
    )

    assert lines[0].endswith("[done]") and lines[-1] == "1 of 1 IN_PROGRESS jobs to fail marked FAILED; 0 skipped."
    job.refresh_from_db()
    assert (job.status, job.error_code, job.lease_token) == ("FAILED", "MARKET_REMOVED", None)
    assert job.error == {
        "code": "MARKET_REMOVED",
        "message": "market removed",
        "retryable": False,
        "needsReauth": False,
    }
    ((_, actor, detail),) = events(job, "marked_failed")
    assert actor.startswith("cli:") and detail == "MARKET_REMOVED: market removed"
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]

    again = run("job_mark_failed", "--job", str(job.id), "--reason", "market removed", "--apply")

    assert again == [
        f"{job.id}  already finished  FAILED MARKET_REMOVED: nothing to do",
        "No IN_PROGRESS jobs to fail found: nothing to do.",
    ]
    assert again.code == 0  # safe to run twice: the job it was asked to stop is stopped
    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]


@pytest.mark.parametrize(
    "args",
    [
        ["--reason", "x"],  # no job
        ["--job", "00000000-0000-0000-0000-000000000001"],  # no reason
        ["--job", "00000000-0000-0000-0000-000000000001", "--reason", "  "],
        ["--job", "00000000-0000-0000-0000-000000000001", "--reason", "x", "--code", "lower-case"],
        ["--job", "nope", "--reason", "x"],
    ],
)
def test_mark_failed_refuses_bad_input(args):
    with pytest.raises(CommandError):
        run("job_mark_failed", *args)


# --- job_purge_expired ---------------------------------------------------------------------------------


def test_purge_dry_run_lists_expired_records_and_deletes_nothing(ims_invalidations):
    expired = waiting(status="COMPLETED", expires_at=ago(hours=1))
    fresh = waiting(status="COMPLETED")
    store_grant(expired)

    lines = run("job_purge_expired")

    assert [line.split()[0] for line in lines[:-1]] == [str(expired.id)]
    assert AsyncJob.objects.filter(id__in=[expired.id, fresh.id]).count() == 2
    assert PromiseGrant.objects.filter(job_id=expired.id).exists()
    assert ims_invalidations == []


def test_purge_apply_deletes_expired_records_with_history_and_grants_and_a_second_run_finds_nothing(ims_invalidations):
    expired = waiting(status="FAILED", error_code="NEEDS_REAUTH", expires_at=ago(hours=1))
    JobEvent.objects.create(job_id=expired.id, kind="failed")
    store_grant(expired)
    running = leased(expires_in=timedelta(minutes=10), expires_at=ago(minutes=1))
    fresh = waiting(status="COMPLETED")
    orphan_id = uuid.uuid4()
    store_grant(orphan_id, value="orphan-token-value")

    lines = run("job_purge_expired", "--apply")

    assert lines_about(lines, expired)[0].endswith("[done]")
    assert "skipped: it is still IN_PROGRESS" in lines_about(lines, running)[0]
    assert any(line.startswith(f"{orphan_id}  end orphaned grant") and line.endswith("[done]") for line in lines)
    assert lines[-1] == "2 of 3 expired records purged; 1 skipped."
    assert set(AsyncJob.objects.values_list("id", flat=True)) == {running.id, fresh.id}
    assert not JobEvent.objects.filter(job_id=expired.id).exists()
    assert not PromiseGrant.objects.filter(job_id__in=[expired.id, orphan_id]).exists()
    assert sorted(ims_invalidations) == sorted([("semrush", KNOWN_TOKEN), ("semrush", "orphan-token-value")])

    again = run("job_purge_expired", "--apply")

    assert again[-1] == "0 of 1 expired records purged; 1 skipped."
    assert len(ims_invalidations) == 2


def test_the_purge_forgets_workers_silent_past_the_retention_window_and_keeps_the_others(settings):
    from jobs.models import WorkerHeartbeat

    settings.WORKER_HEARTBEAT_RETENTION_SECONDS = 3600
    for worker, silent in (("gone:1", timedelta(minutes=61)), ("dead:2", timedelta(minutes=15)), ("up:3", None)):
        WorkerHeartbeat.objects.create(
            worker=worker, queues=",q,", beat_at=ago(seconds=silent.total_seconds() if silent else 1)
        )

    dry = run("job_purge_expired")

    assert [line for line in dry if line.startswith("gone:1")] == [
        f"gone:1  forget dead worker  silent since {WorkerHeartbeat.objects.get(worker='gone:1').beat_at:%Y-%m-%dT%H:%M:%SZ}"
        "  [dry run]"
    ]
    assert WorkerHeartbeat.objects.count() == 3

    applied = run("job_purge_expired", "--apply")

    assert applied[0].startswith("gone:1  forget dead worker") and applied[0].endswith("[done]")
    assert applied[-1] == "1 of 1 expired records purged; 0 skipped."
    assert sorted(WorkerHeartbeat.objects.values_list("worker", flat=True)) == ["dead:2", "up:3"]
    assert run("job_purge_expired", "--apply") == ["No expired records found: nothing to do."]


def test_purge_status_filter_narrows_the_selection():
    failed = waiting(status="FAILED", expires_at=ago(hours=1))
    waiting(status="COMPLETED", expires_at=ago(hours=1))

    assert [line.split()[0] for line in run("job_purge_expired", "--status", "FAILED")[:-1]] == [str(failed.id)]


def test_purge_refuses_an_unknown_status():
    with pytest.raises(CommandError):
        run("job_purge_expired", "--status", "DONE")


# --- job_sweep_unsent -------------------------------------------------------------------------------------


def test_sweep_unsent_dry_run_lists_jobs_never_sent_and_apply_publishes_them_once(queues):
    unsent = plant(created_at=ago(minutes=5), updated_at=ago(minutes=5), message_sent_at=None)
    young = plant(message_sent_at=None)
    sent = waiting()

    dry = run("job_sweep_unsent")

    assert [line.split()[0] for line in dry[:-1]] == [str(unsent.id)]
    assert queues.drain() == []

    applied = run("job_sweep_unsent", "--apply")

    assert applied[0].startswith(f"{unsent.id}  re-publish") and applied[0].endswith("[done]")
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(unsent.id)]
    assert [e[0] for e in events(unsent, "republished")] == ["republished"]
    assert run("job_sweep_unsent", "--apply") == ["No unsent jobs found: nothing to do."]
    assert not lines_about(dry, young) and not lines_about(dry, sent)


# --- job_inspect --------------------------------------------------------------------------------------------


def test_inspect_shows_status_lease_checkpoints_history_and_dlq_presence_without_changing_anything(queues):
    job = leased(
        expires_in=-timedelta(minutes=3),
        phase="generated",
        job_type="generateSemrushMarket",
        params={"market": "FR", "languageCode": "fr", "brand": "Acme", "promiseToken": KNOWN_TOKEN},
        checkpoints={"batch": {"prompts": [{"prompt": "a"}, {"prompt": "b"}]}, "batchSize": 2},
    )
    JobEvent.objects.create(job_id=job.id, kind="lease_claimed", actor="worker-1", at=ago(minutes=20))
    store_grant(job)
    to_dlq(job.id, "generateSemrushMarket")
    before = snapshot()

    text = "\n".join(run("job_inspect", "--job", str(job.id)))

    assert f"job {job.id}  generateSemrushMarket  IN_PROGRESS  phase generated" in text
    assert "; FR/fr of Acme" in text  # the job's handler describes it
    assert "lease        expired, expires" in text
    assert "checkpoints  batch=2 prompts, batchSize=2" in text
    assert "queue        in DLQ: message" in text
    assert "lease_claimed" in text and "worker-1" in text
    assert KNOWN_TOKEN not in text
    assert snapshot() == before
    assert dlq_job_ids() == [str(job.id)]


def test_inspect_reports_a_missing_job_and_exits_1():
    missing = uuid.uuid4()
    output = run("job_inspect", "--job", str(missing))
    assert output[0] == f"job {missing}  not found (purged after expiry, or never created)"
    assert output.code == 1


def test_inspect_labels_the_dlq_receive_count_as_including_operators_reads(queues):
    job = waiting(attempts=3)
    to_dlq(job.id)

    output = run("job_inspect", "--job", str(job.id))

    (line,) = [line for line in output if "in DLQ: message" in line]
    assert "(operators' reads included; the job's attempts say how often workers ran it)" in line
    assert any("attempts 3" in line for line in output) and output.code == 0


def test_inspect_needs_a_job_or_a_filter():
    with pytest.raises(CommandError):
        run("job_inspect")


@pytest.mark.parametrize(
    "name",
    [
        "job_inspect",
        "job_release_leases",
        "job_requeue_stuck",
        "job_redrive_dlq",
        "job_mark_failed",
        "job_purge_expired",
        "job_sweep_unsent",
        "job_probe",
    ],
)
def test_every_runbook_help_says_when_to_run_it(name):
    from django.core.management import load_command_class

    assert "Run it " in load_command_class("jobs", name).help


def test_timestamps_in_the_future_read_as_in():
    from jobs.display import ago as age

    assert age(timezone.now() + timedelta(minutes=10, seconds=5)) == "in 10m"


@pytest.mark.parametrize(
    ("seconds", "text"), [(30, "30s"), (90, "90s"), (1800, "30m"), (1830, "1830s"), (7200, "2h"), (86400, "1d")]
)
def test_a_default_threshold_is_shown_exactly_as_older_than_would_take_it(seconds, text):
    from jobs.management.commands._runbook import duration_text, parse_duration

    assert duration_text(seconds) == text
    assert parse_duration(text) == timedelta(seconds=seconds)
