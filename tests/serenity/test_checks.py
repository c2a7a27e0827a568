"""Timeout nesting (SPEC §5.9) and the receive limit above the attempt budget are system checks: a broken
configuration does not start."""

import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from serenity.checks import timeout_nesting_errors


def test_the_default_timeouts_nest():
    call_command("check")  # raises SystemCheckError on any error


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        (
            "QUEUE_VISIBILITY_TIMEOUT_SECONDS",
            930,
            "QUEUE_VISIBILITY_TIMEOUT_SECONDS=930 must be greater than JOB_LEASE_TTL_SECONDS=930",
        ),
        (
            "JOB_LEASE_TTL_SECONDS",
            899,
            "JOB_LEASE_TTL_SECONDS=899 must be greater than JOB_TASK_TIME_LIMIT_SECONDS=900",
        ),
        (
            "DRS_TIMEOUT_SECONDS",
            800,
            "JOB_TASK_TIME_LIMIT_SECONDS=900 must be greater than "
            "DRS_TIMEOUT_SECONDS + SEMRUSH_WRITE_BUDGET_SECONDS=920",
        ),
    ],
)
def test_a_broken_nesting_fails_the_check_with_a_clear_message(settings, setting, value, message):
    setattr(settings, setting, value)
    with pytest.raises(SystemCheckError, match=r"serenity\.E001") as raised:
        call_command("check")
    assert message in str(raised.value)


def test_each_broken_link_of_the_chain_is_reported():
    errors = timeout_nesting_errors(visibility=10, lease=20, task_limit=30, drs=300, writes=120)
    assert [e.id for e in errors] == ["serenity.E001"] * 3


def test_a_worker_with_broken_timeouts_refuses_to_start():
    env = {**os.environ, "JOB_LEASE_TTL_SECONDS": "1000", "DJANGO_SETTINGS_MODULE": "tests.settings"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "serenity",
            "worker",
            "-P",
            "solo",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Refusing to start the worker" in result.stderr + result.stdout
    assert "QUEUE_VISIBILITY_TIMEOUT_SECONDS=960 must be greater than JOB_LEASE_TTL_SECONDS=1000" in (
        result.stderr + result.stdout
    )


@pytest.mark.parametrize("receive_count", [5, 3])
def test_a_receive_limit_not_above_the_attempt_budget_fails_the_check(settings, receive_count):
    settings.JOB_MAX_ATTEMPTS = 5
    settings.MARKET_JOBS_MAX_RECEIVE_COUNT = receive_count

    with pytest.raises(SystemCheckError, match=r"serenity\.E004") as raised:
        call_command("check")

    assert f"MARKET_JOBS_MAX_RECEIVE_COUNT={receive_count} must be greater than JOB_MAX_ATTEMPTS=5" in str(raised.value)


def test_a_worker_whose_receive_limit_is_not_above_the_attempt_budget_refuses_to_start():
    env = {
        **os.environ,
        "MARKET_JOBS_MAX_RECEIVE_COUNT": "5",
        "JOB_MAX_ATTEMPTS": "5",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "serenity",
            "worker",
            "-P",
            "solo",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "serenity.E004: MARKET_JOBS_MAX_RECEIVE_COUNT=5 must be greater than JOB_MAX_ATTEMPTS=5" in (
        result.stderr + result.stdout
    )
