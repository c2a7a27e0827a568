"""A receive that SQS answers with an error (5xx, timeout) is an empty receive: the worker logs it and polls
again, instead of exiting on kombu's AttributeError (jobs/worker/receive_errors.py)."""

import http.client
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

from jobs.worker import receive_errors as receives
from serenity.celery import app
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_terminal, wait_until

REPO = Path(__file__).resolve().parents[3]
# An overloaded SQS answers its 503 late: the answer then reaches the worker's event loop on its socket, the path
# on which kombu's AttributeError ends the process (answered at once, it surfaces in a timer, which kombu logs
# and the receive loop stops for good).
ANSWER_AFTER_SECONDS = 1.0


@pytest.fixture
def channel(moto_server):
    """A real kombu SQS channel of the product's broker connection."""
    with app.connection_for_read() as connection:
        yield connection.default_channel


def test_kombus_own_handling_of_an_error_answer_raises_attribute_error(channel):
    """The defect, in the installed kombu: a 5xx or timeout answer reaches the channel as `[]`."""
    with pytest.raises(AttributeError):
        receives._original(channel, django_settings.MARKET_JOBS_QUEUE_URL, django_settings.MARKET_JOBS_QUEUE, [])


def test_an_error_answer_is_an_empty_receive_with_one_warning(channel, caplog):
    receives.install()
    receives.install()  # idempotent
    assert receives.installed()

    with caplog.at_level(logging.WARNING, logger="jobs.worker.receive_errors"):
        got = channel._on_messages_ready(django_settings.MARKET_JOBS_QUEUE_URL, django_settings.MARKET_JOBS_QUEUE, [])

    assert got == 0  # what kombu returns for a receive that brought nothing: the loop polls again
    [record] = [r for r in caplog.records if r.name == "jobs.worker.receive_errors"]
    assert (record.levelname, record.getMessage()) == ("WARNING", "SQS receive answered with an error; polling again")
    assert record.queue == django_settings.MARKET_JOBS_QUEUE
    # A real answer still goes to kombu: no messages, 0.
    assert channel._on_messages_ready(django_settings.MARKET_JOBS_QUEUE_URL, django_settings.MARKET_JOBS_QUEUE, {}) == 0


class FailingReceives(ThreadingHTTPServer):
    """An HTTP proxy in front of the local SQS that answers the first `failures` ReceiveMessage requests with
    503 and forwards every other request as it came."""

    def __init__(self, upstream: str, failures: int) -> None:
        super().__init__(("127.0.0.1", 0), Relay)
        self.upstream = urlsplit(upstream)
        self.failures_left = failures
        self.failed = 0
        self.receives_forwarded = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def take_failure(self) -> bool:
        with self.lock:
            if not self.failures_left:
                self.receives_forwarded += 1
                return False
            self.failures_left -= 1
            self.failed += 1
            return True


def is_receive(headers, body: bytes) -> bool:
    # botocore speaks SQS's JSON protocol (X-Amz-Target); kombu's client also knows the query protocol.
    return headers.get("X-Amz-Target") == "AmazonSQS.ReceiveMessage" or b"Action=ReceiveMessage" in body


class Relay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the worker's curl client expects
    server: FailingReceives

    def do_POST(self) -> None:
        self.relay()

    def do_GET(self) -> None:
        self.relay()

    def relay(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if is_receive(self.headers, body) and self.server.take_failure():
            time.sleep(ANSWER_AFTER_SECONDS)
            self.answer(503, [("Content-Type", "application/x-amz-json-1.0")], b'{"__type":"ServiceUnavailable"}')
            return
        upstream = http.client.HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=60)
        try:
            hop = {"connection", "content-length", "expect", "transfer-encoding"}
            upstream.request(
                self.command, self.path, body, {k: v for k, v in self.headers.items() if k.lower() not in hop}
            )
            response = upstream.getresponse()
            content = response.read()
            self.answer(response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in hop], content)
        finally:
            upstream.close()

    def answer(self, status: int, headers: list[tuple[str, str]], content: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, format, *args) -> None:
        pass


@pytest.fixture
def proxy(moto_server):
    server = FailingReceives(os.environ["AWS_ENDPOINT_URL"], failures=2)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


@pytest.mark.worker
def test_a_worker_whose_receives_sqs_answers_503_keeps_running_and_completes_the_job(
    world,
    async_on,
    queues,
    proxy,
    tmp_path,
):
    db = django_settings.DATABASES["default"]
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": proxy.url,  # the broker, its queue URLs and the worker's own SQS client
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "crashing_worker.py"), "never"],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        # Both error answers given, and a receive forwarded after them: the receive loop went on (kombu alone
        # ends the process at the first one).
        wait_until(lambda: proxy.receives_forwarded or worker.poll() is not None, timeout=60)
        assert worker.poll() is None, f"the worker exited ({worker.returncode}):\n{log_path.read_text()[-3000:]}"
        assert proxy.failed == 2

        job, _market = start_job(world)
        job = wait_terminal(job, timeout=60)

        assert job.status == "COMPLETED", job.error
        assert job.attempts == 1
        assert worker.poll() is None  # still alive after the job
        os.kill(worker.pid, signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    assert proxy.failed == 2
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    warnings = [
        {k: line[k] for k in ("level", "message", "queue")}
        for line in lines
        if line.get("logger") == "jobs.worker.receive_errors"
    ]
    assert warnings == 2 * [
        {
            "level": "WARNING",
            "message": "SQS receive answered with an error; polling again",
            "queue": django_settings.MARKET_JOBS_QUEUE,
        }
    ]
    assert "Unrecoverable error" not in log_path.read_text()
