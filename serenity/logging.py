"""Structured JSON log lines, with request/job ids and token values redacted as defence in depth.

Code never logs a token on purpose; the redaction filter is the second line: it scrubs bearer headers,
JWT-shaped strings and `token=`-style pairs from the message, its arguments and its extra fields.
"""

import json
import logging
import re
from datetime import UTC, datetime

from opentelemetry import trace

from serenity import context

REDACTED = "[REDACTED]"
_PATTERNS = [
    # Authorization headers and bare "Bearer <value>" / "Basic <value>".
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), f"Bearer {REDACTED}"),
    (re.compile(r"(?i)\bbasic\s+[A-Za-z0-9+/=]{4,}"), f"Basic {REDACTED}"),
    # JWT-shaped values: three base64url segments, the first a JSON header.
    (re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+"), REDACTED),
    # key=value / "key": "value" pairs whose key names a secret (query parameters, form fields, JSON, cookies:
    # `sessionToken=`, `access_token=`, `x-promise-token:`...).
    (
        re.compile(
            r"(?i)([\"']?(?:promise_token|access_token|refresh_token|id_token|client_secret|x-promise-token|"
            r"authorization|cookie|password|api_key|x-api-key|token)[\"']?\s*[:=]\s*[\"']?)[^\"'\s,;&}]+"
        ),
        rf"\g<1>{REDACTED}",
    ),
]


def redact(text: str) -> str:
    """Return `text` with anything token-shaped replaced by a marker."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


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
