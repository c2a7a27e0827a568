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


# --- redaction by meaning: a URL's query decoded, credential-named parameters, words kept ---------------------------

# The JWT with each `.` percent-encoded, and with every byte percent-encoded.
DOTS_ENCODED = JWT.replace(".", "%2E")
ALL_ENCODED = "".join(f"%{byte:02X}" for byte in JWT.encode())
SECRETS = (JWT, OPAQUE, DOTS_ENCODED, ALL_ENCODED, JWT.split(".")[1], JWT.split(".")[2])
QUERIES = {
    "dots encoded": f"q={DOTS_ENCODED}",
    "every byte encoded": f"q={ALL_ENCODED}",
    "plus and escapes": f"x=a+b&q=%20{JWT.replace('.', '%2E', 1)}+",
    "promise": f"promise={OPAQUE}",
    "apikey": f"apikey={OPAQUE}",
    "api-key, any case": f"Api-Key={OPAQUE}",
    "a name ending in secret": f"client%5Fsecret={OPAQUE}",
    "session": f"session={OPAQUE}",
}


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.fixture
def django_request_log(capture):
    """The `django.request` logger (Django's own lines about an answer: "Not Found: …", with the request),
    writing through the filters every handler has."""
    _, stream = capture
    logger = logging.getLogger("django.request")
    capture_handler = logging.StreamHandler(stream)
    capture_handler.setFormatter(JsonFormatter())
    capture_handler.addFilter(ContextFilter())
    capture_handler.addFilter(RedactingFilter())
    logger.addHandler(capture_handler)
    yield stream
    logger.removeHandler(capture_handler)


@pytest.mark.django_db
@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_a_credential_in_a_url_query_never_reaches_the_django_request_log(client, django_request_log, query):
    response = client.get(f"/no-such-page?{query}")

    assert response.status_code == 404
    out = django_request_log.getvalue()
    assert "Not Found: /no-such-page" in out and "[REDACTED]" in out
    assert_no_secret(out)


@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_a_credential_in_a_url_query_never_reaches_gunicorns_access_log(capsys, query):
    from datetime import timedelta
    from types import SimpleNamespace

    from gunicorn.config import Config

    from serenity.gunicorn import ScrubbedLogger

    cfg = Config()
    cfg.set("accesslog", "-")
    access = ScrubbedLogger(cfg)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": f"/v2/orgs?{query}",
        "PATH_INFO": "/v2/orgs",
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
    }
    response = SimpleNamespace(status="404 Not Found", sent=0, headers=[])

    access.access(response, SimpleNamespace(headers=[]), environ, timedelta(milliseconds=3))

    (line,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert line["message"].startswith("127.0.0.1 - - [") and '"GET /v2/orgs?' in line["message"]
    assert "[REDACTED]" in line["message"]
    assert_no_secret(json.dumps(line))


def test_an_ordinary_query_is_logged_as_sent(capture):
    logger, stream = capture
    logger.info('"GET /v2/orgs?market=us&q=a+b%20c HTTP/1.1" 200')
    assert lines(stream)[0]["message"] == '"GET /v2/orgs?market=us&q=a+b%20c HTTP/1.1" 200'


def test_a_bearer_rejected_line_keeps_its_words(capture):
    logger, stream = capture
    logger.info("bearer rejected", extra={"reason": "Bearer token expired"})
    logger.info("Bearer rejected: Bearer %s", OPAQUE)
    first, second = lines(stream)
    assert (first["message"], first["reason"]) == ("bearer rejected", "Bearer token expired")
    assert second["message"] == "Bearer rejected: Bearer [REDACTED]"


def redact_every_pattern(text):
    """`redact` as it was before it skipped the patterns a text cannot match: every pattern run on every text."""
    from serenity import logging as scrubber

    text = scrubber._QUERY.sub(scrubber._redact_query, text)
    text = scrubber._ESCAPED.sub(scrubber._redact_escaped, text)
    for pattern, replacement in scrubber._PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@pytest.mark.parametrize(
    "text",
    [
        'SELECT "async_jobs"."id" FROM "async_jobs" WHERE ("async_jobs"."id" = %s AND EXISTS(SELECT %s AS "a"))',
        "/v2/orgs/29a3d785-b2a2-4e75-8370-086d64cd50f6/brands/78d8/serenity/markets/generation/jobs/a5a7",
        "GET v2/orgs/<str:orgId>/brands/<str:brandId>/serenity/markets/generation/jobs/<str:jobId>",
        f"Authorization: BEARER {JWT}",
        f"a bare {JWT} in text",
        "basic dXNlcjpwYXNzd29yZA==",
        "Cookie: sessionid=abc123; csrftoken=xyz",
        "X-API-Key: k-1234567890",
        "client_secret='s3cr3t' and PassWord=hunter2",
        "/callback?code=abc&state=1&next=%2Fhome",
        "/a/%65yJhbGciOiJSUzI1NiJ9.eyJ1c2VyX2lkIjoidSJ9.c2lnbmF0dXJlLXZhbHVl/b",
        "/a%2Fb/c?x=%41%42",
        "100% of it, %zz and %4",
        "pa\u017f\u017fword=hunter2",  # a long s, which IGNORECASE reads as `s`
        "api_\u212aey: not ASCII, X-API-\u212aEY=abc",  # a Kelvin sign, read as `k`
        "tok\u0130n and cook\u0130e=abc",  # a dotted capital I, read as `i`
        "",
    ],
)
def test_skipping_the_patterns_a_text_cannot_match_changes_no_output(text):
    from serenity.logging import redact

    assert redact(text) == redact_every_pattern(text)
