"""What leaves the process as a span: scrubbed copies (no token, no query string), whole lines in the span
file, and no trace started by a bare client call."""

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from serenity import tracing
from serenity.tracing import JsonLinesExporter, ScrubbingExporter, sampler

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyLTEifQ.c2lnbmF0dXJlLXZhbHVl"
PROMISE = "promise-value-0f9e8d7c6b5a"


@pytest.fixture
def exported():
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler())
    provider.add_span_processor(SimpleSpanProcessor(ScrubbingExporter(memory)))
    yield provider.get_tracer("test"), memory
    provider.shutdown()


def test_an_exported_span_keeps_no_token_and_no_query_string(exported):
    tracer, memory = exported
    with tracer.start_as_current_span(f"POST /token?access_token={JWT}", kind=SpanKind.SERVER) as span:
        span.set_attributes(
            {
                "url.full": f"https://ims.example/ims/token/v4?access_token={JWT}&x=1",
                "http.target": f"/v2/orgs/1?token={PROMISE}",
                "url.query": f"promise_token={PROMISE}",
                "note": f"Bearer {JWT}",
                "job.id": "8f2c",
                "job.attempt": 2,
            }
        )
        span.add_event("exception", {"exception.message": f"refused promise_token={PROMISE} for Bearer {JWT}"})
        span.set_status(Status(StatusCode.ERROR, f"exchange failed: token={PROMISE}"))

    [span] = memory.get_finished_spans()
    text = json.dumps(
        {
            "name": span.name,
            "attributes": dict(span.attributes),
            "status": span.status.description,
            "events": [dict(e.attributes) for e in span.events],
        }
    )
    assert JWT not in text and PROMISE not in text
    assert span.attributes["url.full"] == "https://ims.example/ims/token/v4"
    assert span.attributes["http.target"] == "/v2/orgs/1"
    assert span.attributes["url.query"] == ""
    assert (span.attributes["job.id"], span.attributes["job.attempt"]) == ("8f2c", 2)


def test_a_text_seen_again_is_scrubbed_as_the_first_time_and_a_token_is_never_remembered(exported):
    # The scrubber remembers the texts it found clean (the same SQL in every delivery's spans): one that held a token
    # is scrubbed every time it is seen, whichever spans carried it before.
    tracer, memory = exported
    statement = 'UPDATE "async_jobs" SET "phase" = %s WHERE "async_jobs"."id" = %s'
    for _ in range(3):
        with (
            tracer.start_as_current_span("run/jobs.run", kind=SpanKind.CONSUMER),
            tracer.start_as_current_span("UPDATE", kind=SpanKind.CLIENT) as span,
        ):
            span.set_attributes({"db.statement": statement, "note": f"Bearer {JWT}"})

    updates = [s for s in memory.get_finished_spans() if s.name == "UPDATE"]
    assert [s.attributes["db.statement"] for s in updates] == [statement] * 3
    assert [s.attributes["note"] for s in updates] == ["Bearer [REDACTED]"] * 3
    assert statement in tracing._CLEAN and not any(JWT in text for text in tracing._CLEAN)


def test_no_trace_starts_with_a_bare_client_call_but_a_requests_calls_are_kept(exported):
    tracer, memory = exported
    with tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT) as heartbeat_query:
        assert not heartbeat_query.is_recording()
    with (
        tracer.start_as_current_span("GET /v2/…", kind=SpanKind.SERVER),
        tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT),
    ):
        pass

    assert [(s.name, s.kind) for s in memory.get_finished_spans()] == [
        ("SELECT", SpanKind.CLIENT),
        ("GET /v2/…", SpanKind.SERVER),
    ]


def test_a_callers_trace_is_continued_even_when_the_caller_did_not_sample_it(exported):
    from opentelemetry import propagate

    tracer, memory = exported
    unsampled = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
    with tracer.start_as_current_span("POST /v2/…", context=propagate.extract(unsampled), kind=SpanKind.SERVER):
        pass

    [request] = memory.get_finished_spans()
    assert format(request.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"


def test_the_span_file_gets_one_whole_line_per_span_from_each_writer(tmp_path):
    path = tmp_path / "traces" / "spans.jsonl"
    providers = []
    for _ in range(2):  # two processes' exporters on the same file
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ScrubbingExporter(JsonLinesExporter(path))))
        providers.append(provider)
    for i in range(10):
        with providers[i % 2].get_tracer("test").start_as_current_span(f"step {i}", attributes={"n": i}):
            pass

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["name"] for line in lines] == [f"step {i}" for i in range(10)]
    assert {line["attributes"]["n"] for line in lines} == set(range(10))
    assert all(len(line["traceId"]) == 32 and len(line["spanId"]) == 16 for line in lines)


def test_an_outside_calls_span_keeps_its_attributes_without_the_header_copies_nobody_reads(spans, live_server):
    # No header is captured (OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_* unset): httpx's instrumentation makes
    # no copy of them (serenity.tracing._no_unread_header_copies), and its span says what it said with them.
    import httpx
    from opentelemetry.instrumentation import httpx as instrumentation

    from serenity.tracing import span

    assert instrumentation._normalize_headers is tracing._no_headers
    with span("semrush.publish"), httpx.Client() as client:
        client.get(f"{live_server.url}/healthz?token={PROMISE}", headers={"Authorization": f"Bearer {JWT}"})

    [call] = [s for s in spans.get_finished_spans() if s.kind == SpanKind.CLIENT]
    assert call.name == "GET"
    assert dict(call.attributes) == {
        "http.method": "GET",
        "http.url": f"{live_server.url}/healthz",
        "http.status_code": 200,
    }
