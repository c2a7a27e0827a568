"""Every runbook command answers with the exit code docs/operations.md gives it: 0 nothing needs a human, 1
something does or a named job does not exist, 2 a usage error, 130 interrupted; run twice with --apply, the
second run exits 0; a reader that stops reading (`| head`) ends nothing; an interrupt releases the DLQ messages
the command held, even when it arrives in the middle of a receive or a second time on the way out."""

import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management.base import CommandError

from jobs.clients import sqs
from jobs.management.commands._runbook import RunbookCommand
from jobs.models import WorkerHeartbeat
from tests.jobs.conftest import ago, dlq_job_ids, leased, plant, run, store_grant, to_dlq, waiting

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
RUNBOOKS = [
    "doctor",
    "job_inspect",
    "job_release_leases",
    "job_requeue_stuck",
    "job_redrive_dlq",
    "job_mark_failed",
    "job_purge_expired",
    "job_sweep_unsent",
    "job_rerun",
    "job_probe",
]
NOT_FOUND = "job {}  not found (purged after expiry, or never created)"


def minimal_args(command: str) -> list[str]:
    """What a command needs to run at all."""
    return {
        "job_inspect": ["--status", "IN_PROGRESS"],
        "job_mark_failed": ["--job", str(uuid.uuid4()), "--reason", "x"],
    }.get(command, [])


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("job_inspect", []),
        ("job_release_leases", ["--apply"]),
        ("job_requeue_stuck", ["--apply"]),
        ("job_redrive_dlq", ["--apply"]),
        ("job_rerun", ["--apply"]),
        ("job_mark_failed", ["--reason", "gone", "--apply"]),
    ],
)
def test_a_well_formed_job_id_that_names_no_job_exits_1_saying_so(queues, command, args):
    present, missing = waiting(), uuid.uuid4()

    output = run(command, "--job", str(missing), "--job", str(present.id), *args)

    assert NOT_FOUND.format(missing) in output
    assert NOT_FOUND.format(present.id) not in output
    assert output.code == 1


def test_a_redrive_naming_a_purged_job_whose_message_is_still_in_the_dlq_drops_it_and_exits_0(queues):
    purged = uuid.uuid4()
    to_dlq(purged)

    output = run("job_redrive_dlq", "--job", str(purged), "--apply")

    assert output[0].startswith(f"{purged}  drop  job no longer exists") and output[0].endswith("[done]")
    assert NOT_FOUND.format(purged) not in output
    assert output.code == 0 and dlq_job_ids() == []


def _stale_lease():
    return ["--job", str(leased(expires_in=-timedelta(minutes=5)).id)]


def _stuck():
    return ["--job", str(waiting(quiet=timedelta(hours=2)).id)]


def _in_dlq():
    job = waiting()
    to_dlq(job.id)
    return ["--job", str(job.id)]


def _running():
    return ["--job", str(waiting().id), "--reason", "market removed"]


def _exhausted():
    job = waiting(
        status="FAILED",
        error_code="RETRIES_EXHAUSTED",
        ended_at=ago(minutes=5),
        error={"code": "RETRIES_EXHAUSTED", "message": "x", "retryable": True, "needsReauth": False},
    )
    store_grant(job)
    return ["--job", str(job.id)]


def _expired_record():
    return ["--job", str(waiting(status="COMPLETED", expires_at=ago(hours=1)).id)]


def _unsent():
    plant(created_at=ago(minutes=5), updated_at=ago(minutes=5), message_sent_at=None)
    return []


def _doctor_finding():
    waiting(quiet=timedelta(hours=2))
    return []


@pytest.mark.parametrize(
    ("command", "plant_work"),
    [
        ("job_release_leases", _stale_lease),
        ("job_requeue_stuck", _stuck),
        ("job_redrive_dlq", _in_dlq),
        ("job_mark_failed", _running),
        ("job_rerun", _exhausted),
        ("job_purge_expired", _expired_record),
        ("job_sweep_unsent", _unsent),
        ("doctor", _doctor_finding),
    ],
)
def test_a_dry_run_that_finds_work_exits_1_and_apply_twice_exits_0_both_times(
    queues, workers_alive, ims_invalidations, command, plant_work
):
    args = plant_work()

    dry, first, second = run(command, *args), run(command, *args, "--apply"), run(command, *args, "--apply")

    assert (dry.code, first.code, second.code) == (1, 0, 0), (dry, first, second)


@pytest.mark.parametrize("command", RUNBOOKS)
def test_a_usage_error_exits_2(command):
    bad = ["--limit", "0"] if command == "job_redrive_dlq" else ["--no-such-option"]
    if command == "job_redrive_dlq":
        with pytest.raises(CommandError) as refused:
            run(command, *bad)
        assert refused.value.returncode == 2
        return
    manage = subprocess.run(
        [sys.executable, "manage.py", command, *bad],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        timeout=120,
    )
    assert manage.returncode == 2, manage.stderr


@pytest.mark.parametrize("command", RUNBOOKS)
def test_an_interrupted_command_exits_130(queues, monkeypatch, command):
    def terminated(self, *args, **options):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(RunbookCommand, "handle", terminated)

    output = run(command, *minimal_args(command))

    assert output.code == 130 and output[-1] == f"{command}: interrupted; nothing more was done."


def test_the_probe_exits_0_only_when_no_job_is_stuck_and_a_worker_is_alive(queues, workers_alive):
    assert run("job_probe").code == 0
    stuck = waiting(quiet=timedelta(hours=2))
    assert run("job_probe").code == 1
    stuck.delete()
    WorkerHeartbeat.objects.all().delete()
    assert run("job_probe").code == 1


# --- Interrupted DLQ reads ------------------------------------------------------------------------------------


def test_a_sigterm_inside_a_dlq_receive_releases_every_message_received_so_far_and_exits_130(queues, monkeypatch):
    jobs = [waiting(status="COMPLETED") for _ in range(12)]  # two receives' worth
    for job in jobs:
        to_dlq(job.id)
    real_receive = sqs.receive
    calls = []

    def receive_then_terminated(*args, **kwargs):
        batch = real_receive(*args, **kwargs)
        calls.append(len(batch))
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # SQS has handed these over: they must not stay held
        return batch

    monkeypatch.setattr(sqs, "receive", receive_then_terminated)
    output = run("doctor", "--apply")
    monkeypatch.setattr(sqs, "receive", real_receive)

    assert output.code == 130 and output[-1] == "doctor: interrupted; nothing more was done."
    assert calls == [10, 2]  # it stopped right after the receive it was interrupted in
    assert sorted(dlq_job_ids()) == sorted(str(j.id) for j in jobs)  # visible again at once, not after 30 s


def test_a_second_sigterm_during_the_release_does_not_cut_it_short(queues, monkeypatch):
    jobs = [waiting(status="COMPLETED") for _ in range(12)]
    for job in jobs:
        to_dlq(job.id)
    real_release = sqs.change_visibility_batch
    releases = []

    def diagnose_terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)

    def release_terminated_again(*args, **kwargs):
        releases.append(len(args[1]))
        os.kill(os.getpid(), signal.SIGTERM)
        return real_release(*args, **kwargs)

    from jobs.services import doctor

    monkeypatch.setattr(doctor, "diagnose", diagnose_terminated)
    monkeypatch.setattr(sqs, "change_visibility_batch", release_terminated_again)
    output = run("doctor")

    assert output.code == 130
    assert releases == [10, 2]
    assert sorted(dlq_job_ids()) == sorted(str(j.id) for j in jobs)


def manage_env() -> dict:
    db = django_settings.DATABASES["default"]
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("command", [["doctor"], ["job_redrive_dlq"], ["job_inspect", "--status", "COMPLETED"]])
def test_from_the_shell_a_sigterm_mid_read_and_another_on_the_way_out_exit_130_with_nothing_held(queues, command):
    jobs = [waiting(status="COMPLETED") for _ in range(12)]
    for job in jobs:
        to_dlq(job.id)

    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "interrupted_command.py"), *command],
        cwd=REPO,
        env=manage_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 130, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"{command[0]}: interrupted; nothing more was done."
    assert "Traceback" not in result.stderr
    assert sorted(dlq_job_ids()) == sorted(str(j.id) for j in jobs)


# --- A reader that stops reading -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("exists", "code"), [(True, 0), (False, 1)])
def test_a_reader_that_closes_the_pipe_ends_nothing_and_the_exit_code_stays_the_commands(queues, exists, code):
    job_id = waiting().id if exists else uuid.uuid4()
    command = subprocess.Popen(
        [sys.executable, "manage.py", "job_inspect", "--job", str(job_id)],
        cwd=REPO,
        env=manage_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    command.stdout.close()  # `| head` that has read its lines: before the command writes its first one

    stderr = command.stderr.read()

    assert command.wait(timeout=120) == code
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


# --- A signal at start-up, or once the work is done -------------------------------------------------------


def as_in_a_terminal() -> None:
    """The command's signals as an operator's shell leaves them: Ctrl-C's SIGINT at its default. (A suite run in
    the background of a script inherits SIGINT ignored, and Python then installs no handler for it.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("moment", ["start-up", "after its last line"])
@pytest.mark.parametrize(
    "command", [["doctor"], ["job_inspect", "--status", "IN_PROGRESS"], ["job_requeue_stuck"]], ids=lambda c: c[0]
)
def test_a_signal_at_start_up_exits_130_having_done_nothing_and_after_the_last_line_the_exit_code_is_the_commands(
    queues, command, moment, sig
):
    for _ in range(3):
        waiting()
    env = {**manage_env(), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, str(REPO / "manage.py"), *command]
    own = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert own.returncode in (0, 1), own.stderr  # not the code an interrupt gives
    lines = len(own.stdout.splitlines())

    if moment == "start-up":  # the process signals itself while Django starts up (tests/interrupted_start.py)
        argv = [sys.executable, str(REPO / "tests" / "interrupted_start.py"), sig.name, *command]
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_in_a_terminal,
    )
    try:
        if moment == "start-up":
            out, err = process.communicate(timeout=120)
            assert process.returncode == 130, err
            assert err.strip().splitlines()[-1] == f"{command[0]}: interrupted; nothing more was done."
            assert out == ""  # Django was still starting: the command did nothing
        else:
            read = [process.stdout.readline() for _ in range(lines)]
            assert all(read)
            process.send_signal(sig)
            process.send_signal(sig)
            out, err = process.communicate(timeout=120)
            assert process.returncode == own.returncode, err
            assert "interrupted" not in err
        assert "Traceback" not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
