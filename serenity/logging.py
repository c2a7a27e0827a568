"""Structured JSON log lines, with request/job ids and token values redacted as defence in depth.

Code never logs a token on purpose; the redaction filter is the second line: it scrubs bearer headers,
JWT-shaped strings and `token=`-style pairs from the message, its arguments and its extra fields.
"""

import json
import logging
import re
from datetime import UTC, datetime
from urllib.parse import unquote_plus

from opentelemetry import trace

from serenity import context

REDACTED = "[REDACTED]"
_PATTERNS = [
    # Authorization headers and bare "Bearer <value>" / "Basic <value>". A value is a credential when it holds a
    # digit or is 20 characters long: "bearer rejected" keeps its words.
    (
        re.compile(r"(?i)\bbearer\s+(?=[A-Za-z0-9._~+/=-]*[0-9]|[A-Za-z0-9._~+/=-]{20})[A-Za-z0-9._~+/=-]+"),
        f"Bearer {REDACTED}",
    ),
    (
        re.compile(r"(?i)\bbasic\s+(?=[A-Za-z0-9+/=]*[0-9+/=]|[A-Za-z0-9+/=]{20})[A-Za-z0-9+/=]{4,}"),
        f"Basic {REDACTED}",
    ),
    # JWT-shaped values: three base64url segments, the first a JSON header.
    (re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+"), REDACTED),
    # key=value / "key": "value" pairs whose key names a secret (form fields, JSON, cookies, headers:
    # `sessionToken=`, `access_token=`, `x-promise-token:`...). A URL's query is handled first, decoded
    # (_redact_query).
    (
        re.compile(
            r"(?i)([\"']?(?:promise_token|access_token|refresh_token|id_token|client_secret|x-promise-token|"
            r"authorization|cookie|password|api_key|apikey|x-api-key|token|secret)[\"']?\s*[:=]\s*[\"']?)"
            r"[^\"'\s,;&}]+"
        ),
        rf"\g<1>{REDACTED}",
    ),
]

# The query parameters whose value is a credential whatever it looks like, compared lower-cased with `-` read
# as `_` (docs/operations.md, "Logs"): these names, and any name ending in `token`, `secret`, `password` or
# `key`.
CREDENTIAL_PARAMETERS = frozenset(
    {
        "promise",
        "promise_token",
        "x_promise_token",
        "apikey",
        "api_key",
        "x_api_key",
        "key",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "session",
        "sessiontoken",
        "session_token",
        "sessionid",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "code",
        "jwt",
        "assertion",
        "signature",
        "sig",
    }
)
_CREDENTIAL_SUFFIXES = ("token", "secret", "password", "key")
# One `name=value` of a URL's query: after `?`, or after `&` / `;` once a `?` came before it on that run.
_QUERY = re.compile(r"\?[^\s\"'<>#]*")
_PAIR = re.compile(r"(?P<sep>^\?|[&;])(?P<name>[^=&;]*)=(?P<value>[^&;]*)")
# A run of text holding percent-escapes (a path segment, a cookie, a header value).
_ESCAPED = re.compile(r"[^\s\"'<>]*%[0-9A-Fa-f]{2}[^\s\"'<>]*")
_AN_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def is_credential_parameter(name: str) -> bool:
    name = unquote_plus(name).strip().lower().replace("-", "_")
    return name in CREDENTIAL_PARAMETERS or name.endswith(_CREDENTIAL_SUFFIXES)


# A literal every match of _PATTERNS holds (compared case-insensitively): ASCII text holding none of them is left as it
# is without running the patterns. Each pattern tries its alternatives at every position, so a long URL or SQL
# statement (a span's `db.statement`, every access log line) cost a hundred times the check.
_TRIGGERS = (
    "bearer",
    "basic",
    "eyj",
    "token",
    "secret",
    "authorization",
    "cookie",
    "password",
    "api_key",
    "apikey",
    "api-key",
)


# The triggers as one search: a single scan of the text instead of one per trigger (and a generator's steps).
_A_TRIGGER = re.compile("|".join(re.escape(trigger) for trigger in _TRIGGERS))


def _redact_plain(text: str) -> str:
    # ASCII only: `lower()` then matches exactly what the patterns' IGNORECASE matches.
    if text.isascii() and _A_TRIGGER.search(text.lower()) is None:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _redact_pair(match: re.Match) -> str:
    name, value = match["name"], match["value"]
    if is_credential_parameter(name):
        return f"{match['sep']}{name}={REDACTED}"
    decoded = unquote_plus(value)
    scrubbed = _redact_plain(decoded)
    return f"{match['sep']}{name}={value if scrubbed == decoded else scrubbed}"


def _redact_query(match: re.Match) -> str:
    return _PAIR.sub(_redact_pair, match.group())


def _redact_escaped(match: re.Match) -> str:
    text = match.group()
    decoded = unquote_plus(text)
    scrubbed = _redact_plain(decoded)
    return text if scrubbed == decoded else scrubbed


def redact(text: str) -> str:
    """Return `text` with anything token-shaped replaced by a marker. A URL's query is read as the server reads
    it (percent-escapes and `+` decoded) before it is matched: the value of a credential-named parameter is
    redacted whatever it is, any other value when, decoded, it holds something token-shaped. Any other run of
    percent-escaped text is decoded and matched too."""
    if "?" in text:
        text = _QUERY.sub(_redact_query, text)
    if _AN_ESCAPE.search(text):  # every match holds one; without, the pattern still tried every run at every position
        text = _ESCAPED.sub(_redact_escaped, text)
    return _redact_plain(text)


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class RedactingFilter(logging.Filter):
    """Render the message once, redact it, and redact string extras; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string still gets logged, redacted
            message = f"{record.msg} {record.args}"
        record.msg, record.args = redact(message), None
        for key, value in list(vars(record).items()):
            if key not in _STANDARD:
                setattr(record, key, _redact_value(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def _redact_value(value):
    """Redact strings inside a structure; a key named like a secret loses its whole value. Anything else but a
    number or a boolean becomes its redacted text here, never later: an object's repr (Django's request, say,
    with its query string) would otherwise be written out after the scrubbing."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET_KEY.search(str(k)) else _redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value(v) for v in value]
    return redact(str(value))


_SECRET_KEY = re.compile(r"(?i)token|secret|authorization|password|credential")


class MetricsOnly(logging.Filter):
    """Passes EMF metric records only: they go to stdout, where CloudWatch's agent reads metrics."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "emf", None) is not None


class NoMetrics(logging.Filter):
    """Passes every record but EMF metric records (those have their own handler on stdout)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "emf", None) is None


class ContextFilter(logging.Filter):
    """Adds the request id, the job id and the trace id (32 hex digits, as in the job's history and the
    trace store) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = getattr(record, "request_id", None) or context.request_id.get()
        record.job_id = getattr(record, "job_id", None) or context.job_id.get()
        span = trace.get_current_span().get_span_context()
        record.trace_id = getattr(record, "trace_id", None) or (
            format(span.trace_id, "032x") if span.is_valid else None
        )
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line. EMF metric lines (a `_aws` extra) are emitted as the bare EMF document."""

    def format(self, record: logging.LogRecord) -> str:
        emf = getattr(record, "emf", None)
        if emf is not None:
            return json.dumps(emf, separators=(",", ":"), default=str)
        doc = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key != "emf" and value is not None:
                doc[key] = value
        if record.exc_text:
            doc["exc"] = record.exc_text
        elif record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)
