"""The doctor, against a planted case of each inconsistency it knows: it names each one, a dry run
changes nothing, and --apply leaves a state a second run reports clean. A worker is alive (its heartbeat row)
unless a test says otherwise; tests/jobs/test_doctor_cases.py runs the table of cases with real workers."""

import uuid
from datetime import timedelta

import pytest
from django.core.management.base import CommandError

from jobs.clients import sqs
from jobs.models import AsyncJob, JobEvent, WorkerHeartbeat
from jobs.services import doctor
from markets.generation import jobtype
from tests.jobs.conftest import (
    ago,
    dlq_job_ids,
    leased,
    plant,
    run,
    scheduled_task_to_dlq,
    snapshot,
    to_dlq,
    waiting,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def a_worker_is_alive(workers_alive):
    return workers_alive


GEN = jobtype.MARKET_GENERATION_JOB_TYPE
BATCH = {
    "prompts": [{"prompt": "best running shoes", "category": "x"}, {"prompt": "trail shoes", "category": "y"}],
    "summary": {"verdict": "ship"},
}


@pytest.fixture
def planted(queues):
    """One job (or DLQ message) per inconsistency, beside healthy jobs the doctor must leave alone."""
    cases = {
        doctor.WAITING_WITHOUT_MESSAGE + ":never_sent": plant(
            job_type=GEN, created_at=ago(minutes=5), updated_at=ago(minutes=5), message_sent_at=None
        ),
        doctor.WAITING_WITHOUT_MESSAGE + ":lost": waiting(job_type=GEN, quiet=timedelta(hours=2)),
        doctor.LEASE_EXPIRED: leased(job_type=GEN, expires_in=-timedelta(minutes=20), phase=jobtype.PHASE_GENERATING),
        doctor.WRITE_STALLED: waiting(
            job_type=GEN,
            quiet=timedelta(minutes=10),
            phase=jobtype.PHASE_GENERATED,
            checkpoints={"batch": BATCH, "batchSize": 2},
        ),
        doctor.WRITTEN_NOT_COMPLETED: waiting(
            job_type=GEN,
            quiet=timedelta(minutes=10),
            phase=jobtype.PHASE_WRITTEN,
            checkpoints={"batch": BATCH, "batchSize": 2, "projectId": "proj-1", "written": 2},
        ),
        doctor.DLQ_MESSAGE_FOR_FINISHED_JOB: waiting(job_type=GEN, status="COMPLETED"),
    }
    missing = uuid.uuid4()
    to_dlq(cases[doctor.DLQ_MESSAGE_FOR_FINISHED_JOB].id, GEN)
    to_dlq(missing, GEN)
    healthy = [
        leased(
            job_type=GEN,
            expires_in=timedelta(minutes=10),
            phase=jobtype.PHASE_GENERATED,
            quiet=timedelta(seconds=20),
            checkpoints={"batch": BATCH, "batchSize": 2},
        ),  # a worker is writing right now
        waiting(
            job_type=GEN,
            quiet=timedelta(minutes=1),
            phase=jobtype.PHASE_GENERATED,
            checkpoints={"batch": BATCH, "batchSize": 2},
        ),  # batch just persisted
        waiting(job_type=GEN, quiet=timedelta(minutes=10)),  # queued, message sent 10 minutes ago
        waiting(job_type=GEN, status="FAILED", error_code="NEEDS_REAUTH"),
        waiting(job_type=GEN, status="COMPLETED"),
    ]
    return cases, missing, healthy


def findings(lines) -> dict[str, set[str]]:
    """`{kind: {subject, ...}}` from the doctor's one-line-per-finding output."""
    out: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith("note  ") or "  " not in line:
            continue
        subject, kind = line.split("  ")[:2]
        out.setdefault(kind, set()).add(subject)
    return out


def expected(cases, missing) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, job in cases.items():
        out.setdefault(key.split(":")[0], set()).add(str(job.id))
    out[doctor.DLQ_MESSAGE_FOR_FINISHED_JOB].add(str(missing))
    return out


def test_the_doctor_names_each_planted_inconsistency_and_its_action_without_changing_anything(planted, queues):
    cases, missing, _ = planted
    before = snapshot()

    lines = run("doctor")

    assert findings(lines[:-1]) == expected(cases, missing)
    by_subject = {line.split("  ")[0]: line for line in lines if not line.startswith("note")}
    assert (
        "-> re-enqueue (job_requeue_stuck): its worker died; a claim takes an expired lease over  [dry run]"
        in by_subject[str(cases[doctor.LEASE_EXPIRED].id)]
    )
    assert "which is not produced again" in by_subject[str(cases[doctor.WRITE_STALLED].id)]
    written = by_subject[str(cases[doctor.WRITTEN_NOT_COMPLETED].id)]
    assert "external writes done (" in written and "written=2" in written and "projectId=proj-1" in written
    assert "but the job is not COMPLETED" in written
    assert "its message was never sent" in by_subject[str(cases[doctor.WAITING_WITHOUT_MESSAGE + ":never_sent"].id)]
    assert "-> drop the DLQ message" in by_subject[str(missing)]
    assert lines[-1].startswith("7 inconsistencies (") and lines[-1].endswith(
        "Dry run: nothing changed; re-run with --apply to take the safe actions."
    )
    assert any(line.startswith("note  Semrush not compared") for line in lines)
    assert snapshot() == before
    assert queues.drain() == []
    assert sorted(dlq_job_ids()) == sorted([str(cases[doctor.DLQ_MESSAGE_FOR_FINISHED_JOB].id), str(missing)])


def test_the_doctor_apply_takes_each_safe_action_and_a_second_run_reports_clean(planted, queues):
    cases, missing, healthy = planted
    healthy_before = [h for h in snapshot() if h[0] in {j.id for j in healthy}]

    lines = run("doctor", "--apply")

    assert findings(lines[:-1]) == expected(cases, missing)
    assert all(line.endswith("[done]") for line in lines[:-1] if not line.startswith("note"))
    assert lines[-1].startswith("7 inconsistencies (") and lines[-1].endswith("7 of 7 fixed, 0 need an operator.")
    expired = AsyncJob.objects.get(id=cases[doctor.LEASE_EXPIRED].id)
    assert (expired.status, expired.lease_token) == ("IN_PROGRESS", None)
    requeued = {
        str(cases[k].id)
        for k in (
            doctor.LEASE_EXPIRED,
            doctor.WAITING_WITHOUT_MESSAGE + ":never_sent",
            doctor.WAITING_WITHOUT_MESSAGE + ":lost",
            doctor.WRITE_STALLED,
            doctor.WRITTEN_NOT_COMPLETED,
        )
    }
    assert sorted((m["kwargs"]["jobId"], m["kwargs"]["type"]) for m in queues.drain()) == sorted(
        (job_id, GEN) for job_id in requeued
    )
    assert set(JobEvent.objects.filter(kind="requeued").values_list("job_id", flat=True)) == {
        uuid.UUID(i) for i in requeued
    }
    assert JobEvent.objects.get(kind="dlq_message_dropped").job_id == cases[doctor.DLQ_MESSAGE_FOR_FINISHED_JOB].id
    assert [h for h in snapshot() if h[0] in {j.id for j in healthy}] == healthy_before

    again = run("doctor", "--apply")

    assert [line for line in again if not line.startswith("note")] == ["No inconsistencies found."]
    assert dlq_job_ids() == []


def test_a_waiting_job_whose_message_is_in_the_dlq_is_reported_but_never_redriven(queues):
    job = waiting(job_type=GEN)
    to_dlq(job.id, GEN)

    lines = run("doctor", "--apply")

    (line,) = [line for line in lines if line.startswith(str(job.id))]
    assert f"{job.id}  {doctor.DLQ_MESSAGE_FOR_WAITING_JOB}  " in line
    assert "none automatic: the DLQ is never redriven by itself" in line and not line.endswith("[done]")
    # Put in the DLQ directly: its one receive is the doctor's own, never a worker's.
    assert "no worker ever received it: its 1 receive(s) were all DLQ readers'" in line
    assert "worker logs around" not in line
    assert lines[-1].endswith("0 of 0 fixed, 1 need an operator.")
    assert queues.drain() == []
    assert dlq_job_ids() == [str(job.id)]


def test_a_message_sqs_dead_lettered_counts_the_workers_receives_apart_from_the_dlq_readers(queues, settings):
    from jobs.selectors import deliveries
    from jobs.services.doctor import _why_dead_lettered

    job = waiting(job_type=GEN)
    max_receives = settings.MARKET_JOBS_MAX_RECEIVE_COUNT
    why = _why_dead_lettered(deliveries(job), max_receives + 3)
    assert why.startswith(f"no delivery ever claimed it: workers received its message {max_receives} times")
    assert "(3 later receive(s) by DLQ readers)" in why


def test_the_stuck_threshold_for_waiting_jobs_follows_older_than(queues):
    job = waiting(job_type=GEN, quiet=timedelta(minutes=20))

    assert [line for line in run("doctor") if not line.startswith("note")] == ["No inconsistencies found."]
    assert findings(run("doctor", "--older-than", "15m")) == {doctor.WAITING_WITHOUT_MESSAGE: {str(job.id)}}


def test_the_doctor_refuses_a_bad_threshold_as_a_usage_error():
    with pytest.raises(CommandError) as refused:
        run("doctor", "--older-than", "an hour")
    assert refused.value.returncode == 2


def test_the_doctor_stops_with_one_clear_line_when_sqs_refuses(monkeypatch):
    def refused(*args, **kwargs):
        raise sqs.AWSError[1]({"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue"}}, "ReceiveMessage")

    monkeypatch.setattr(sqs, "receive", refused)
    output = run("doctor")

    assert output.code == 1
    assert output == [
        "doctor: SQS refused the request (AWS.SimpleQueueService.NonExistentQueue); check the queue "
        "URLs and the credentials"
    ]


# --- What the doctor never hides, and never makes worse ---------------------------------------------------------


def only(lines, kind) -> list[str]:
    return [line for line in lines if f"  {kind}  " in line]


def test_a_dlq_job_with_an_expired_lease_is_reported_with_the_redrive_command_and_never_re_sent(queues):
    job = leased(job_type=GEN, expires_in=-timedelta(minutes=5), attempts=2)
    to_dlq(job.id, GEN)

    output = run("doctor", "--apply")

    (line,) = only(output, doctor.DLQ_MESSAGE_FOR_WAITING_JOB)
    assert line.startswith(str(job.id)) and f"job_redrive_dlq --job {job.id} --apply" in line
    assert not only(output, doctor.LEASE_EXPIRED)
    assert output.code == 1
    assert queues.drain() == []
    assert AsyncJob.objects.get(id=job.id).lease_token == job.lease_token  # not even released
    assert dlq_job_ids() == [str(job.id)]


def test_a_dlq_copy_of_a_job_under_a_live_lease_is_a_finding_not_clean(queues):
    job = leased(job_type=GEN, expires_in=timedelta(minutes=5), quiet=timedelta(seconds=5))
    to_dlq(job.id, GEN)

    output = run("doctor", "--apply")

    (line,) = only(output, doctor.DLQ_COPY_OF_RUNNING_JOB)
    assert line.startswith(str(job.id)) and "job_redrive_dlq" in line
    assert "No inconsistencies found." not in output and output.code == 1
    assert queues.drain() == [] and dlq_job_ids() == [str(job.id)]


def test_a_held_lease_whose_job_is_silent_for_three_heartbeats_is_a_presumed_dead_worker(queues, settings):
    settings.JOB_HEARTBEAT_SECONDS = 10
    silent = leased(job_type=GEN, expires_in=timedelta(minutes=10), quiet=timedelta(seconds=31))
    alive = leased(job_type=GEN, expires_in=timedelta(minutes=10), quiet=timedelta(seconds=25))

    output = run("doctor", "--apply")

    (line,) = only(output, doctor.WORKER_PRESUMED_DEAD)
    assert line.startswith(str(silent.id)) and "job_mark_failed" in line and "doctor --apply re-enqueues" in line
    assert not [line for line in output if line.startswith(str(alive.id))]
    assert output.code == 1
    assert AsyncJob.objects.get(id=silent.id).lease_token == silent.lease_token  # a live lease is never taken
    assert queues.drain() == []


def test_a_queue_no_live_worker_consumes_is_reported_from_the_heartbeats_whatever_it_holds(queues, settings):
    from jobs.services import producer

    WorkerHeartbeat.objects.update(beat_at=ago(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS + 1))
    job = waiting(job_type=GEN, quiet=timedelta(seconds=5))
    producer._send(job.id, GEN)  # just sent: its message waits, and no worker will take it

    output = run("doctor", "--apply")

    lines = only(output, doctor.NO_CONSUMER)
    assert [line.split("  ")[0] for line in lines] == [settings.MARKET_JOBS_QUEUE, settings.MAINTENANCE_QUEUE]
    assert "no live worker consumes it (last heartbeat 1m ago from planted-host:1" in lines[0]
    assert "it holds ~1 waiting, 0 in flight, 0 delayed; 1 job(s) IN_PROGRESS" in lines[0]
    assert not [line for line in output if line.startswith(str(job.id))]
    assert "note  workers alive (heartbeat within 60s): 0 on serenity-market-jobs, 0 on serenity-maintenance" in output
    assert output.code == 1


def test_with_no_worker_heartbeat_on_record_the_empty_queues_still_have_no_consumer(queues, settings):
    WorkerHeartbeat.objects.all().delete()

    output = run("doctor")

    (line, _) = only(output, doctor.NO_CONSUMER)
    assert line.startswith(
        f"{settings.MARKET_JOBS_QUEUE}  no_consumer  no live worker consumes it (no worker heartbeat on record"
    )
    assert "it holds ~0 waiting, 0 in flight, 0 delayed; 0 job(s) IN_PROGRESS" in line
    assert output.code == 1


def test_a_message_waiting_while_a_worker_is_alive_is_not_a_missing_consumer(queues):
    from jobs.services import producer

    job = waiting(job_type=GEN, quiet=timedelta(minutes=3))
    producer._send(job.id, GEN)

    output = run("doctor")

    assert output.code == 0 and "No inconsistencies found." in output


def test_with_no_worker_alive_nothing_that_may_still_be_queued_is_re_sent_and_apply_piles_nothing_up(queues):
    WorkerHeartbeat.objects.all().delete()
    expired = leased(job_type=GEN, expires_in=-timedelta(minutes=5))
    lost = waiting(job_type=GEN, quiet=timedelta(hours=2))
    never_sent = plant(job_type=GEN, created_at=ago(minutes=5), updated_at=ago(minutes=5), message_sent_at=None)

    first = run("doctor", "--apply")
    second = run("doctor", "--apply")

    for output in (first, second):
        (line,) = only(output, doctor.LEASE_EXPIRED)
        assert line.startswith(str(expired.id)) and "held back: no worker is alive to take it" in line
        assert not line.endswith("[done]")
        (line,) = [line for line in output if line.startswith(str(lost.id))]
        assert f"  {doctor.WAITING_WITHOUT_MESSAGE}  " in line and "held back" in line
        assert output.code == 1
    (line,) = [line for line in first if line.startswith(str(never_sent.id))]
    assert "its message was never sent" in line and line.endswith("[done]")  # no copy anywhere: safe to send
    assert not [line for line in second if line.startswith(str(never_sent.id))]  # sent once, not again
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(never_sent.id)]  # no copy of the others
    assert AsyncJob.objects.get(id=expired.id).lease_token == expired.lease_token


def test_a_job_whose_deliveries_keep_dying_is_reported_and_never_re_sent_wherever_its_message_is(queues):
    from jobs.services import producer

    looping = leased(job_type=GEN, expires_in=-timedelta(minutes=1), attempts=2, lost_deliveries=1)
    producer._send(looping.id, GEN)  # its message is back on the queue, not (yet) in the DLQ
    once = leased(job_type=GEN, expires_in=-timedelta(minutes=1), attempts=1)  # one death: re-enqueued

    output = run("doctor", "--apply")

    (line,) = only(output, doctor.CRASH_LOOP)
    assert line.startswith(str(looping.id))
    assert "its last 2 deliveries died without an outcome (attempts 2" in line
    assert f"job_mark_failed --job {looping.id}" in line and f"job_requeue_stuck --job {looping.id}" in line
    (line,) = only(output, doctor.LEASE_EXPIRED)
    assert line.startswith(str(once.id)) and line.endswith("[done]")
    assert output.code == 1
    assert sorted(m["kwargs"]["jobId"] for m in queues.drain()) == sorted([str(looping.id), str(once.id)])
    assert AsyncJob.objects.get(id=looping.id).lease_token == looping.lease_token  # untouched


def test_dlq_messages_held_by_another_reader_make_the_read_incomplete_never_clean(queues):
    from jobs.dlq import DlqScan

    job = waiting(job_type=GEN, status="COMPLETED")
    to_dlq(job.id, GEN)
    with DlqScan(hold_seconds=60):  # a concurrent (or killed) reader holds the DLQ's only message
        output = run("doctor", "--apply")

    (line,) = only(output, doctor.DLQ_READ_INCOMPLETE)
    assert "read 0 of ~1 DLQ message(s)" in line
    assert "No inconsistencies found." not in output and output.code == 1
    assert any("DLQ ~0 waiting, 1 in flight, 0 read" in line for line in output)
    assert dlq_job_ids() == [str(job.id)]  # released on exit: the next read finds it


def test_a_scheduled_tasks_message_in_the_dlq_is_named_by_its_task(queues):
    from jobs.tasks import sweep_unsent_task

    message_id = scheduled_task_to_dlq(sweep_unsent_task)

    output = run("doctor", "--apply")

    (line,) = only(output, doctor.DLQ_MESSAGE_NOT_A_JOB)
    assert line.startswith(f"message {message_id} (jobs.sweep_unsent)")
    assert "job_redrive_dlq --only-other-tasks --apply deletes such messages and nothing else" in line
    assert output.code == 1


def test_an_interrupted_doctor_releases_the_dlq_messages_it_held_and_exits_130(queues, monkeypatch):
    import os
    import signal

    job = waiting(job_type=GEN, status="COMPLETED")
    to_dlq(job.id, GEN)

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # what `kill <pid>` or a closing terminal sends, mid-read

    monkeypatch.setattr(doctor, "diagnose", terminated)
    output = run("doctor")

    assert output.code == 130 and output[-1] == "doctor: interrupted; nothing more was done."
    assert dlq_job_ids() == [str(job.id)]  # visible again at once, not after the 30 s hold


@pytest.mark.parametrize(
    ("plant_case", "args", "code"),
    [
        ("nothing", (), 0),
        ("fixable", (), 1),  # a dry run that found work
        ("fixable", ("--apply",), 0),  # found and fixed: nothing left for a human
        ("operator", ("--apply",), 1),  # a finding only an operator can resolve
    ],
)
def test_doctor_exit_codes(queues, plant_case, args, code):
    if plant_case == "fixable":
        waiting(job_type=GEN, quiet=timedelta(hours=2))
    elif plant_case == "operator":
        to_dlq(waiting(job_type=GEN).id, GEN)

    assert run("doctor", *args).code == code
