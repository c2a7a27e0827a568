"""Test settings: the product's settings on PostgreSQL, with the local SQS (moto) and the simulators
(served by pytest-django's live server) on ports chosen once per test session.

Ports go into the environment before the product settings load, so worker subprocesses started by a
test inherit the same endpoints.
"""

import os
import socket


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Under pytest-xdist every worker process needs its own local SQS and live server: the controller's choice,
# inherited through the environment, is replaced once per worker (subprocesses a test starts keep their
# worker's ports, because they inherit the owner mark too). pytest-django gives each worker its own database.
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _xdist_worker and os.environ.get("SERENITY_TEST_PORTS_OWNER") != _xdist_worker:
    os.environ["SERENITY_TEST_PORTS_OWNER"] = _xdist_worker
    for _name in (
        "SERENITY_TEST_MOTO_PORT",
        "SERENITY_TEST_LIVE_PORT",
        "DJANGO_LIVE_TEST_SERVER_ADDRESS",
        "AWS_ENDPOINT_URL",
        "LOCAL_BASE_URL",
    ):
        os.environ.pop(_name, None)

os.environ.setdefault("SERENITY_ENVIRONMENT", "test")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/serenity")
os.environ.setdefault("SERENITY_TEST_MOTO_PORT", str(_free_port()))
os.environ.setdefault("SERENITY_TEST_LIVE_PORT", str(_free_port()))
os.environ.setdefault("DJANGO_LIVE_TEST_SERVER_ADDRESS", f"127.0.0.1:{os.environ['SERENITY_TEST_LIVE_PORT']}")
os.environ.setdefault("AWS_ENDPOINT_URL", f"http://127.0.0.1:{os.environ['SERENITY_TEST_MOTO_PORT']}")
os.environ.setdefault("LOCAL_BASE_URL", f"http://127.0.0.1:{os.environ['SERENITY_TEST_LIVE_PORT']}")
# Short waits so a stopped test worker never leaves a long poll that swallows a message.
os.environ.setdefault("SQS_WAIT_TIME_SECONDS", "0")
os.environ.setdefault("SQS_POLLING_INTERVAL", "0.1")
os.environ.setdefault("SERENITY_ASYNC_PROMPT_GEN", "false")
# Request-limit budgets live in a table, which outlives a test: limits are out of reach unless a test sets its own
# (the `throttle_rates` fixture).
os.environ.setdefault("THROTTLE_REAUTH_RATE", "100000/min")
os.environ.setdefault("THROTTLE_ONBOARDING_RATE", "100000/min")
os.environ.setdefault("THROTTLE_ORG_MARKETS_RATE", "1000000/hour")
os.environ.setdefault("THROTTLE_ORG_REAUTH_RATE", "1000000/hour")
# The fleet's Semrush rate budget is on (every worker call takes its slot, one statement) but out of reach of the
# simulators' few calls unless a test sets its own (tests/markets/clients/test_semrush_budget.py).
os.environ.setdefault("SEMRUSH_MAX_CALLS_PER_SECOND", "1000")

from serenity.settings import *  # noqa: E402,F403

DATABASES["default"]["TEST"] = {"NAME": os.environ.get("SERENITY_TEST_DB_NAME", "test_serenity")}  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
