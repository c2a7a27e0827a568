"""Traces: one trace from the entry point's request through the job's SQS message to every delivery and each
external call, the job's ids as span attributes, the trace id in the job's history and in log lines, and no
token anywhere in what is exported, over a whole job with its failures."""

import json
import logging
import time

import pytest
from django.conf import settings

from jobs.models import JobEvent
from jobs.services import job_publish
from sandbox.drs import controls as drs_controls
from sandbox.ims import controls as ims_controls
from sandbox.semrush import controls as semrush_controls
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_terminal
from tokens.clients import ims as ims_client

pytestmark = pytest.mark.worker


def trace_hex(span) -> str:
    return format(span.context.trace_id, "032x")


def named(finished, prefix: str) -> list:
    return [s for s in finished if s.name.startswith(prefix)]


def finished_once(spans, outcomes: int) -> list:
    """The finished spans once `outcomes` deliveries have ended theirs: a delivery's span ends just after its
    job's row changes, so a test that saw the row must still wait for the span."""
    deadline = time.monotonic() + 15
    while True:
        finished = spans.get_finished_spans()
        if sum("job.outcome" in (s.attributes or {}) for s in finished) >= outcomes or time.monotonic() > deadline:
            return finished
        time.sleep(0.1)


def test_a_job_is_one_trace_from_the_request_through_each_delivery_to_every_external_call(
    spans, world, async_on, celery_worker, settings
):
    settings.JOB_RETRY_BASE_SECONDS = 1
    drs_controls.set_latency(1000, remaining=1)  # the delivery is still at DRS when the publish failure is armed
    job, _market = start_job(world)
    semrush_controls.fail_next(4, status=503, path="/publish", method="POST")  # outlasts one delivery's retries
    job = wait_terminal(job, timeout=45)
    assert job.status == "COMPLETED", job.error
    finished = finished_once(spans, outcomes=2)

    [request] = [
        s for s in finished if s.kind.name == "SERVER" and s.name.startswith("POST") and "serenity/markets" in s.name
    ]
    trace_id = trace_hex(request)
    assert request.attributes["job.id"] == str(job.id)
    assert request.attributes["organization.id"] == str(world.org.id)
    deliveries = sorted(
        (s for s in named(finished, "run/jobs.run") if trace_hex(s) == trace_id), key=lambda s: s.start_time
    )
    assert [
        (d.attributes["job.id"], d.attributes["job.type"], d.attributes["organization.id"], d.attributes["job.attempt"])
        for d in deliveries
    ] == [
        (str(job.id), "generateSemrushMarket", str(world.org.id), 1),
        (str(job.id), "generateSemrushMarket", str(world.org.id), 2),
    ]
    in_trace = [s for s in finished if trace_hex(s) == trace_id]
    steps = [
        s.name
        for s in sorted(in_trace, key=lambda s: s.start_time)
        if s.name in ("drs.generate", "ims.exchange", "semrush.write", "semrush.publish")
    ]
    # The first delivery generates, exchanges, writes and fails to publish; the retry exchanges and publishes.
    assert steps == [
        "drs.generate",
        "ims.exchange",
        "semrush.write",
        "semrush.publish",
        "ims.exchange",
        "semrush.publish",
    ]
    kinds = {(s.instrumentation_scope.name.rsplit(".", 1)[-1], s.kind.name) for s in in_trace}
    assert {
        ("django", "SERVER"),
        ("celery", "PRODUCER"),
        ("celery", "CONSUMER"),
        ("httpx", "CLIENT"),
        ("psycopg", "CLIENT"),
    } <= kinds
    # The job's history names the trace of the request and of each delivery (the worker's log lines: see
    # tests/test_embedded_run.py, where the worker is a process of its own).
    assert set(JobEvent.objects.filter(job=job).values_list("trace_id", flat=True)) == {trace_id}


def test_the_message_carries_the_trace_in_its_attributes_and_its_body_stays_job_id_and_type(spans, world, queues):
    from opentelemetry import trace

    from jobs.clients import sqs
    from tests.jobs.conftest import plant

    job = plant(job_type="testEcho")
    with trace.get_tracer("test").start_as_current_span("operator") as span:
        assert job_publish(job.id, job.job_type)
    [raw] = sqs.client().receive_message(
        QueueUrl=settings.MARKET_JOBS_QUEUE_URL, MessageAttributeNames=["All"], MaxNumberOfMessages=10
    )["Messages"]
    traceparent = raw["MessageAttributes"]["traceparent"]["StringValue"]
    assert traceparent.split("-")[1] == format(span.get_span_context().trace_id, "032x")
    from tests.conftest import decode_celery_message

    message = decode_celery_message(raw["Body"])
    assert message["kwargs"] == {"jobId": str(job.id), "type": "testEcho"} and message["args"] == []
    assert message["envelope"]["headers"]["traceparent"].split("-")[1] == traceparent.split("-")[1]


def test_a_send_that_fails_leaves_no_trace_current_on_its_thread(spans, queues, transactional_db):
    from opentelemetry import trace

    from tests.jobs.conftest import plant

    job = plant(job_type="testEcho")
    queues.sqs.client().delete_queue(QueueUrl=queues.url)  # the send now fails
    with trace.get_tracer("test").start_as_current_span("request") as request:
        assert job_publish(job.id, job.job_type) is False
        # Celery's publish span, attached before the send, is not left current after it raised.
        assert trace.get_current_span() is request
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_log_line_names_the_trace_it_was_written_in(caplog):
    from opentelemetry import trace

    from serenity.logging import ContextFilter

    caplog.handler.addFilter(ContextFilter())
    log = logging.getLogger("serenity.test")
    with caplog.at_level(logging.INFO):
        with trace.get_tracer("test").start_as_current_span("delivery") as span:
            log.info("inside")
        log.info("outside")
    inside, outside = caplog.records
    assert inside.trace_id == format(span.get_span_context().trace_id, "032x")
    assert outside.trace_id is None


@pytest.fixture
def issued_tokens(monkeypatch):
    """Every token value IMS hands out during the test (promise tokens minted and rotated, access tokens), read
    at the client seam as they pass: the calls go through unchanged."""
    seen: list[str] = []
    mint, exchange = ims_client.mint, ims_client.exchange

    def spy_mint(**kwargs):
        token = mint(**kwargs)
        seen.append(token.promise_token)
        return token

    def spy_exchange(**kwargs):
        seen.append(kwargs["promise"].promise_token)
        exchanged = exchange(**kwargs)
        seen.extend([exchanged.access.access_token, exchanged.rotated.promise_token])
        return exchanged

    monkeypatch.setattr(ims_client, "mint", spy_mint)
    monkeypatch.setattr(ims_client, "exchange", spy_exchange)
    return seen


def test_no_span_of_a_whole_job_with_its_failures_carries_a_token(
    spans, issued_tokens, world, async_on, celery_worker, settings
):
    settings.JOB_RETRY_BASE_SECONDS = 1
    ims_controls.fail_next_exchanges(1, 401)  # the first delivery's exchange is refused: NEEDS_REAUTH
    job, _market = start_job(world)
    job = wait_terminal(job)
    assert job.error_code == "NEEDS_REAUTH", job.error
    # A bearer in the query string is a mistake callers make: it must not reach a span either.
    poll = world.url(f"markets/generation/jobs/{job.id}")
    assert world.client.get(f"{poll}?access_token={world.token}&token={world.token}").status_code == 200

    semrush_controls.fail_next(8, status=503, path="/publish", method="POST")  # then a retry at publish
    reauth = world.post(world.url(f"markets/generation/jobs/{job.id}/reauth"), {}, **{"x-promise-audience": "semrush"})
    assert reauth.status_code == 202, reauth.content
    job = wait_terminal(job, timeout=45)
    assert job.status == "COMPLETED", job.error

    finished = finished_once(spans, outcomes=4)  # refused exchange, two failed publishes, completed
    secrets = [world.token, *issued_tokens]
    assert len(issued_tokens) >= 6  # two mints; a refused exchange; two exchanges with their access and rotated
    exported = "\n".join(span_text(s) for s in finished)
    # The failures are there to be read: the refused exchange, the publish that failed, each delivery's outcome.
    for seen in (
        "NeedsReauth",
        "semrush.publish: HTTP 503",
        "failed:NEEDS_REAUTH",
        "retry:SEMRUSH_PUBLISH_FAILED",
        "completed",
    ):
        assert seen in exported
    for secret in secrets:
        assert secret not in exported
    assert "Bearer " not in exported and "access_token=" not in exported


def span_text(span) -> str:
    """Everything an exporter receives of a span, as text: name, status, attributes, events and their
    attributes, resource."""
    return json.dumps(
        {
            "name": span.name,
            "status": span.status.description,
            "attributes": dict(span.attributes or {}),
            "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
            "resource": dict(span.resource.attributes),
        },
        default=str,
    )
