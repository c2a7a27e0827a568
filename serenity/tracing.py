"""Traces with OpenTelemetry: one trace from the entry point's request through the job's SQS message to every
delivery and each external call (Django, Celery, httpx, psycopg and botocore instrumentation).

Where spans go (settings TRACES_*): OTLP over HTTP when an OTLP endpoint is configured (the standard
OTEL_EXPORTER_OTLP_* variables), otherwise a JSON-lines file when TRACES_FILE is set (`make run`:
var/traces/spans.jsonl, read by the admin's waterfall), otherwise nowhere: the trace id still goes into every
log line and into the job's history. Every exported span passes `scrubbed()`: its name, attributes and events
go through the same scrubber as log lines (serenity/logging.py), and URLs lose their query string, so no
bearer, promise token or token-carrying query reaches an exporter.
"""

import json
import os
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, Status

from serenity.logging import redact

TRACER_NAME = "serenity"
# Attributes whose value is a URL: kept without their query string (a query may carry `access_token=`); `url.query`,
# the query alone, is emptied.
_URL_ATTRIBUTES = frozenset({"url.full", "http.url", "http.target", "messaging.url", "aws.queue_url"})

_configured = False
_lock = threading.Lock()


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def current_trace_id() -> str:
    """The current trace's id as 32 hex digits, or "" outside any trace."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""


def set_attributes(**attributes) -> None:
    """Set attributes on the current span (`job.id`, `job.type`, `organization.id`, `job.attempt`…); None
    values are left out. Never pass a credential: ids and counts only."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(
            {k: v if isinstance(v, (bool, int, float)) else str(v) for k, v in attributes.items() if v is not None}
        )


def span(name: str, **attributes):
    """A span of our own around one step (`drs.generate`, `ims.exchange`, `semrush.publish`), as a context
    manager; exceptions are recorded on it and propagate."""
    return tracer().start_as_current_span(name, attributes={k: str(v) for k, v in attributes.items() if v is not None})


@contextmanager
def untraced():
    """No instrumentation inside: for a call whose request an instrumentation would change. botocore's Lambda
    extension writes the trace context into the invoked function's JSON payload, i.e. into DRS's input; the
    call is timed by the step's own span (`drs.generate`) instead."""
    with suppress_instrumentation():
        yield


@contextmanager
def contained():
    """Whatever an instrumentation attaches to the context inside and fails to detach is dropped on the way
    out. Celery's publish span is attached before a send and detached after it: a send that raises would
    leave it current on this thread, and every later request on the thread would join that stale trace."""
    token = otel_context.attach(otel_context.get_current())
    try:
        yield
    finally:
        otel_context.detach(token)


def inject() -> dict[str, str]:
    """The current context as W3C `traceparent` (and `tracestate`) carrier entries."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


# --- what leaves the process --------------------------------------------------------------------------------


# Texts the scrubber found nothing in, remembered: every delivery's spans repeat the same texts (each statement's SQL,
# the span names, the database's name and user), and `redact` is a function of its text alone. Only a text it left as
# it was is kept (never one that held anything token-shaped, which is scrubbed again each time it is seen: a statement
# naming `lease_token` beside a parameter is one), none longer than _CLEAN_LONGEST characters, up to _CLEAN_LIMIT of
# them (a few MB at most), all forgotten at once when full (a URL with a job's ids is seldom seen twice).
_CLEAN: set[str] = set()
_CLEAN_LIMIT = 1024
_CLEAN_LONGEST = 4096


def _redact(text: str) -> str:
    """`redact(text)`, without scrubbing again a text already found clean."""
    if text in _CLEAN:
        return text
    scrubbed = redact(text)
    if scrubbed == text and len(text) <= _CLEAN_LONGEST:
        if len(_CLEAN) >= _CLEAN_LIMIT:
            _CLEAN.clear()
        _CLEAN.add(text)
    return scrubbed


def _scrub_value(key: str, value):
    if isinstance(value, str):
        if key == "url.query":
            return ""
        if key in _URL_ATTRIBUTES:
            value = _without_query(value)
        return _redact(value)
    if isinstance(value, (list, tuple)):
        return tuple(_scrub_value(key, v) for v in value)
    return value


def _without_query(url: str) -> str:
    """`url` up to its query string (or fragment)."""
    return url.split("?", 1)[0].split("#", 1)[0]


def _scrub_attributes(attributes) -> dict:
    return {key: _scrub_value(key, value) for key, value in (attributes or {}).items()}


def scrubbed(span: ReadableSpan) -> ReadableSpan:
    """A copy of `span` whose name, status, attributes and events hold no token and no query string."""
    events = [Event(_redact(e.name), _scrub_attributes(e.attributes), e.timestamp) for e in span.events]
    status = span.status
    if status.description:
        status = Status(status.status_code, _redact(status.description))
    return ReadableSpan(
        name=_redact(span.name),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=_scrub_attributes(span.attributes),
        events=events,
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class ScrubbingExporter(SpanExporter):
    """Hands `scrubbed()` copies of the spans to the exporter it wraps; every exporter is wrapped in one."""

    def __init__(self, inner: SpanExporter):
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([scrubbed(s) for s in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class JsonLinesExporter(SpanExporter):
    """One span per line of a JSON-lines file, appended by every process of a local run (API, worker, beat)
    and read by the admin's waterfall (jobs/admin/timeline.py). Each batch is one write(2) on a file opened with
    O_APPEND, so lines from several processes never interleave."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        data = "".join(json.dumps(span_document(s), separators=(",", ":"), default=str) + "\n" for s in spans)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def span_document(s: ReadableSpan) -> dict:
    """The few fields a waterfall needs, in a flat document (ids as hex, times in nanoseconds)."""
    return {
        "traceId": format(s.context.trace_id, "032x"),
        "spanId": format(s.context.span_id, "016x"),
        "parentId": format(s.parent.span_id, "016x") if s.parent else None,
        "name": s.name,
        "kind": s.kind.name,
        "start": s.start_time,
        "end": s.end_time,
        "status": s.status.status_code.name,
        "service": s.resource.attributes.get("service.name", ""),
        "attributes": dict(s.attributes or {}),
    }


class NoQuietRoots(Sampler):
    """Sample every span of a trace that starts with a request, a task or a message; drop the traces that
    would start with a bare client call (a worker's heartbeat query, a probe's queue read): they are noise
    around the traces an operator reads."""

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None, trace_state=None):
        decision = Decision.DROP if kind == SpanKind.CLIENT else Decision.RECORD_AND_SAMPLE
        return SamplingResult(decision, attributes if decision == Decision.RECORD_AND_SAMPLE else None)

    def get_description(self) -> str:
        return "NoQuietRoots"


def sampler() -> Sampler:
    """What is recorded: every span of a trace started here by a request, a task or a message (no trace started
    by a bare client call), and every trace a caller started, even one it marked "not sampled": its decision
    does not blind this service (a collector may still sample what it keeps)."""
    return ParentBased(root=NoQuietRoots(), remote_parent_not_sampled=ALWAYS_ON)


def configure(*, service_name: str, otlp_endpoint: str = "", traces_file: str = "") -> None:
    """Install the tracer provider and the instrumentation, once per process (idempotent)."""
    global _configured
    with _lock:
        if _configured:
            return
        _configured = True
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), sampler=sampler())
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(ScrubbingExporter(OTLPSpanExporter())))
    elif traces_file:
        provider.add_span_processor(
            BatchSpanProcessor(ScrubbingExporter(JsonLinesExporter(Path(traces_file))), schedule_delay_millis=1000)
        )
    trace.set_tracer_provider(provider)
    _instrument()


def _instrument() -> None:
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    # Health checks are polled every few seconds and say nothing about a generation.
    DjangoInstrumentor().instrument(excluded_urls="healthz,readyz,static/")
    # Before OpenTelemetry's middleware (which the instrumentor puts first): the request's target as sent, where the
    # server gives none, so a path outside Latin-1 is answered like any other.
    from django.conf import settings

    otel_at = next(i for i, name in enumerate(settings.MIDDLEWARE) if name.startswith("opentelemetry."))
    settings.MIDDLEWARE.insert(otel_at, "serenity.middleware.RequestTargetMiddleware")
    CeleryInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()
    _no_unread_header_copies()
    # No SQL comments: prepared statements (DB_SERVER_SIDE_BINDING) are reused only when the text is the same.
    PsycopgInstrumentor().instrument(enable_commenter=False, skip_dep_check=True)
    BotocoreInstrumentor().instrument()


def _no_unread_header_copies() -> None:
    """httpx's instrumentation copies every request's and every response's headers (a dict of lists, each value split
    at its commas: about 0.1 ms of CPU a request, 0.8 ms over a delivery's seven calls) to pick out the headers it is
    told to capture, then finds it is told to capture none and drops the copy. It is told to capture headers only by
    OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST / _RESPONSE, which this service does not set (a header
    may carry a credential): with both unset, the copy is not made, and every span keeps exactly the attributes it
    had (a request's method, URL and status). Set either and the instrumentation is left as it ships."""
    from opentelemetry.instrumentation import httpx as instrumentation
    from opentelemetry.util.http import (
        OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST,
        OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE,
        get_custom_headers,
    )

    if get_custom_headers(OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST) or get_custom_headers(
        OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE
    ):
        return
    if callable(getattr(instrumentation, "_normalize_headers", None)):  # a release without it is left as it is
        instrumentation._normalize_headers = _no_headers


def _no_headers(headers, module) -> dict:
    """What httpx's instrumentation hands the header capture when it captures none: nothing."""
    return {}
