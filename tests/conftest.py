"""Shared fixtures: PostgreSQL only, the local SQS (moto server mode), the simulators over real HTTP,
a real Celery worker consuming the market-jobs queue, and a brand onboarded in the simulators (`world`)."""

from __future__ import annotations

import base64
import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from django.conf import settings
from django.db import connection

if TYPE_CHECKING:
    from rest_framework.test import APIClient

    from markets.models import Brand, Organization


def pytest_collection_modifyitems(config, items):
    # Fail fast and clearly when the suite is pointed at anything but PostgreSQL.
    if connection.vendor != "postgresql":
        pytest.exit("The test suite runs on PostgreSQL only: set DATABASE_URL=postgres://USER@HOST:PORT/NAME", 2)


@pytest.fixture(scope="session", autouse=True)
def moto_server():
    """The local SQS/SSM endpoint for the whole session, with the queues and readiness flag bootstrapped."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(os.environ["SERENITY_TEST_MOTO_PORT"]), verbose=False)
    server.start()
    _warm_up(server)
    from jobs import readiness
    from jobs.clients import sqs

    sqs.ensure_queues()
    readiness.readiness_set("true")
    yield server
    server.stop()


def _warm_up(server) -> None:
    """The local SQS loads each service's backend on its first call, which takes seconds on a loaded machine
    (SSM's catalogue of public parameters above all): a patient first call of each, so the product's own
    clients, with their short production timeouts, never meet that one-off wait."""
    import boto3
    from botocore.config import Config

    host, port = server.get_host_and_port()
    patient = Config(connect_timeout=10, read_timeout=120, retries={"max_attempts": 1})
    options = {
        "endpoint_url": f"http://{host}:{port}",
        "region_name": settings.AWS_REGION,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "config": patient,
    }
    boto3.client("ssm", **options).describe_parameters(MaxResults=1)
    boto3.client("sqs", **options).list_queues()


@pytest.fixture
def queues(moto_server):
    """Empty market-jobs queue and DLQ before (and after) the test; returns a small reader."""
    from jobs.clients import sqs

    reader = QueueReader(sqs)
    reader.purge()
    yield reader
    reader.purge()


class QueueReader:
    def __init__(self, sqs):
        self.sqs = sqs
        self.url = settings.MARKET_JOBS_QUEUE_URL
        self.dlq_url = settings.MARKET_JOBS_DLQ_URL

    def purge(self):
        # moto allows one PurgeQueue a minute and purging leaves nothing delayed behind anyway only on
        # AWS; recreating the queues (same names, same URLs) empties them at once, delayed messages too.
        client = self.sqs.client()
        for url in (self.url, self.dlq_url, settings.MAINTENANCE_QUEUE_URL):
            try:
                client.delete_queue(QueueUrl=url)
            except client.exceptions.QueueDoesNotExist:
                pass  # a test removed it to make sends fail
        self.sqs.ensure_queues()

    def drain(self, url=None, *, delete=True) -> list[dict]:
        """Every visible message, decoded to the Celery task call `{task, args, kwargs, raw}`."""
        url = url or self.url
        out = []
        while True:
            batch = self.sqs.receive(url, max_messages=10, visibility=60)
            if not batch:
                return out
            for m in batch:
                out.append(decode_celery_message(m["Body"]))
                if delete:
                    self.sqs.delete(url, m["ReceiptHandle"])


def decode_celery_message(body: str) -> dict:
    envelope = json.loads(base64.b64decode(body))
    args, kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
    return {"task": envelope["headers"]["task"], "args": args, "kwargs": kwargs, "raw": body, "envelope": envelope}


@pytest.fixture(scope="session", autouse=True)
def served_like_production():
    """The live server accepts as many waiting connections as gunicorn does (Django's development server
    keeps 10, and resets the rest), so tests that send bursts see what a deployment answers."""
    from django.core.servers.basehttp import WSGIServer

    WSGIServer.request_queue_size = 2048  # gunicorn's --backlog default


@pytest.fixture
def sims(live_server, transactional_db, settings):
    """The simulators served over real HTTP by the live server; product settings point at them."""
    base = live_server.url
    settings.IMS_HOST = f"{base}/sandbox/ims"
    settings.IMS_JWKS_URL = f"{base}/sandbox/ims/ims/keys"
    settings.SEMRUSH_API_BASE = f"{base}/sandbox/semrush"
    settings.DRS_HTTP_URL = f"{base}/sandbox/drs/invoke"
    from jobs import readiness

    readiness.reset_cache()
    return live_server


@pytest.fixture
def celery_worker(transactional_db, queues):
    """A real Celery worker (thread pool) in this process, consuming the market-jobs queue on moto."""
    from celery.contrib.testing.worker import start_worker

    from serenity.celery import app

    with start_worker(
        app, pool="threads", concurrency=4, perform_ping_check=False, loglevel="WARNING", shutdown_timeout=30
    ) as worker:
        yield worker


@pytest.fixture
def bearer(sims):
    """Mint IMS-simulator user tokens: `bearer(user_id="u1", org_ids=["X@AdobeOrg"], ttl=3600)`."""
    from sandbox.ims.keys import issue_user_token

    def make(user_id="user-1", org_ids=("ORG1@AdobeOrg",), ttl=3600, **kwargs):
        return issue_user_token(user_id=user_id, org_ids=list(org_ids), ttl=ttl, **kwargs)

    return make


@dataclass
class World:
    """An organization and its active brand, whose Semrush workspace exists in the simulator, and a client
    calling the API with the user's bearer: what the onboarding, worker, doctor and admin tests start from."""

    org: Organization
    brand: Brand
    user_id: str
    token: str
    client: APIClient

    def url(self, tail: str) -> str:
        return f"/v2/orgs/{self.org.id}/brands/{self.brand.id}/serenity/{tail}"

    @property
    def brand_fields(self) -> dict:
        """What the original's UI sends about the brand with every market: its domain and names."""
        return {"brandDomain": self.brand.domain, "brandNames": [self.brand.name]}

    def post(self, path: str, body: dict, **headers):
        return self.client.post(
            path, body, format="json", **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
        )


@pytest.fixture
def world(sims, bearer, queues) -> World:
    from rest_framework.test import APIClient

    from markets.clients.semrush import SemrushClient
    from tests.markets.factories import BrandFactory, OrganizationFactory

    org = OrganizationFactory(ims_org_id="0A1B2C3D4E5F60718293A4B5@AdobeOrg")
    token = bearer(user_id="user-1", org_ids=[org.ims_org_id])
    workspace = SemrushClient(token).create_workspace(name="Nordlicht Outdoor", parent_id="serenity")
    brand = BrandFactory(
        organization=org,
        name="Nordlicht Outdoor",
        domain="nordlicht-outdoor.example",
        aliases=["Nordlicht", "Nordlicht Gear"],
        semrush_workspace_id=workspace,
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return World(org=org, brand=brand, user_id="user-1", token=token, client=client)


@pytest.fixture
def async_on(settings):
    settings.SERENITY_ASYNC_PROMPT_GEN = "TRUE"  # any case turns it on


@pytest.fixture
def metric_lines(request):
    """Every EMF document emitted while the test runs, from any thread (the worker's included)."""
    if "celery_worker" in request.fixturenames:
        # Starting a worker re-runs django.setup(), which reconfigures logging and drops handlers
        # attached before it: attach ours after the worker is up.
        request.getfixturevalue("celery_worker")
    captured: list[dict] = []

    class Collect(logging.Handler):
        def emit(self, record):
            if getattr(record, "emf", None) is not None:
                captured.append(record.emf)

    handler = Collect(level=logging.DEBUG)
    logger = logging.getLogger("serenity.metrics")
    logger.addHandler(handler)
    yield captured
    logger.removeHandler(handler)


@pytest.fixture
def throttle_rates(settings, transactional_db):
    """Set request-limit rates for one test (`throttle_rates(onboarding="2/min")`), every budget full."""
    from serenity.models import RateLimit

    def set_rates(**rates):
        settings.THROTTLE_RATES = {**settings.THROTTLE_RATES, **rates}
        RateLimit.objects.all().delete()

    yield set_rates
    RateLimit.objects.all().delete()


@pytest.fixture
def workers_alive(db):
    """A worker alive on both queues, as its heartbeat row says: for tests that plant jobs rather than run a
    worker (the doctor and the probe read the rows, whoever wrote them). Returns the row."""
    from jobs.models import WorkerHeartbeat

    return WorkerHeartbeat.objects.create(
        worker="planted-host:1", queues=f",{settings.MARKET_JOBS_QUEUE},{settings.MAINTENANCE_QUEUE},"
    )


def _test_span_processor():
    from opentelemetry.sdk.trace import SpanProcessor

    class TestSpanProcessor(SpanProcessor):
        """Hands each ended span to the test's exporter while a test asks for spans (the provider keeps its
        span processors for the whole process; this one is added once and switched per test)."""

        exporter = None

        def on_end(self, span):
            exporter = self.exporter
            if exporter is not None:
                exporter.export([span])

    return TestSpanProcessor()


_test_spans = None


@pytest.fixture
def spans(request):
    """Every span ended while the test runs, from any thread (the worker's included), as the product exports
    it: through serenity.tracing's scrubbing exporter, into an in-memory exporter. `spans.get_finished_spans()`."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from serenity.tracing import ScrubbingExporter

    global _test_spans
    if _test_spans is None:
        _test_spans = _test_span_processor()
        trace.get_tracer_provider().add_span_processor(_test_spans)
    memory = InMemorySpanExporter()
    _test_spans.exporter = ScrubbingExporter(memory)
    yield memory
    _test_spans.exporter = None


@pytest.fixture
def span_file(tmp_path, settings):
    """Spans ended while the test runs appended to a span file, as `make run` keeps them (through the scrubbing
    exporter), and the admin reading that file. Returns its path."""
    from opentelemetry import trace

    from serenity.tracing import JsonLinesExporter, ScrubbingExporter

    global _test_spans
    if _test_spans is None:
        _test_spans = _test_span_processor()
        trace.get_tracer_provider().add_span_processor(_test_spans)
    path = tmp_path / "spans.jsonl"
    settings.TRACES_FILE = str(path)
    _test_spans.exporter = ScrubbingExporter(JsonLinesExporter(path))
    yield path
    _test_spans.exporter = None


@pytest.fixture(autouse=True)
def _job_listener_stopped():
    """A test that started the process's job listener (a waiting poll) stops it, so its connection never holds
    the test database open."""
    yield
    from jobs.job_changes import listener

    listener.stop()
