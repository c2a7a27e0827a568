"""Structured JSON log lines and the redaction of token values from them."""

import io
import json
import logging

import pytest

from serenity.logging import ContextFilter, JsonFormatter, RedactingFilter

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJ1c2VyX2lkIjoidSJ9.c2lnbmF0dXJlLXZhbHVl"
OPAQUE = "pt-8d7f6e5d4c3b2a19"


@pytest.fixture
def capture():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def lines(stream):
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_bearer_header_passed_to_a_logger_never_reaches_the_output(capture):
    logger, stream = capture
    logger.info("calling with Authorization: Bearer %s", JWT)
    assert JWT not in stream.getvalue()
    assert "[REDACTED]" in lines(stream)[0]["message"]


def test_token_values_in_extra_fields_and_key_value_text_are_redacted(capture):
    logger, stream = capture
    logger.warning("exchange promise_token=%s failed", OPAQUE, extra={"payload": {"access_token": OPAQUE}, "tok": JWT})
    out = stream.getvalue()
    assert OPAQUE not in out and JWT not in out
    line = lines(stream)[0]
    assert line["message"] == "exchange promise_token=[REDACTED] failed"
    assert line["level"] == "WARNING"


def test_a_token_inside_an_exception_traceback_is_redacted(capture):
    logger, stream = capture
    try:
        raise RuntimeError(f"IMS said no to Bearer {JWT}")
    except RuntimeError:
        logger.exception("boom")
    assert JWT not in stream.getvalue()
    assert "RuntimeError" in lines(stream)[0]["exc"]


def test_ordinary_log_lines_keep_their_content_and_context(capture):
    from serenity import context

    logger, stream = capture
    token = context.job_id.set("job-42")
    try:
        logger.info("job %s moved to %s", "job-42", "COMPLETED", extra={"attempt": 2})
    finally:
        context.job_id.reset(token)
    line = lines(stream)[0]
    assert line["message"] == "job job-42 moved to COMPLETED"
    assert line["job_id"] == "job-42" and line["attempt"] == 2


def test_structured_extras_with_secret_keys_are_masked_without_breaking_the_log_call(capture):
    logger, stream = capture
    logger.info(
        "payload", extra={"body": {"token": ["a-secret-list"], "nested": {"client_secret": 42}, "market": "FR"}}
    )
    line = lines(stream)[0]
    assert line["body"] == {"token": "[REDACTED]", "nested": {"client_secret": "[REDACTED]"}, "market": "FR"}


def test_a_basic_authorization_credential_is_redacted(capture):
    logger, stream = capture
    logger.info("upstream said Authorization: Basic dXNlcjpwYXNzd29yZA==")
    assert "dXNlcjpwYXNzd29yZA" not in stream.getvalue()


def test_metrics_go_to_stdout_and_log_lines_to_stderr():
    """What a deployment's log agent sees from a real process: EMF documents alone on stdout, one per line,
    and the ordinary JSON log lines on stderr."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from django.conf import settings

    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
    }
    code = (
        "import django; django.setup(); import logging; from serenity import metrics; "
        "metrics.emit(StuckInProgressJobs=(3, metrics.COUNT)); logging.getLogger('jobs').warning('ordinary')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    (emf,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert emf["StuckInProgressJobs"] == 3 and emf["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [
        {"Name": "StuckInProgressJobs", "Unit": "Count"}
    ]
    logged = [json.loads(line) for line in done.stderr.splitlines()]
    assert [line["message"] for line in logged] == ["ordinary"]
