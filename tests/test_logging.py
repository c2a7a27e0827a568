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
    logger.info("payload", extra={"body": {"token": ["a-secret-list"], "nested": {"client_secret": 42},
                                           "market": "FR"}})
    line = lines(stream)[0]
    assert line["body"] == {"token": "[REDACTED]", "nested": {"client_secret": "[REDACTED]"}, "market": "FR"}


def test_a_basic_authorization_credential_is_redacted(capture):
    logger, stream = capture
    logger.info("upstream said Authorization: Basic dXNlcjpwYXNzd29yZA==")
    assert "dXNlcjpwYXNzd29yZA" not in stream.getvalue()
