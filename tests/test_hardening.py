"""Production hardening: no implicit environment, bounded key-set fetches, pathological bodies, throttles,
admin login limits, gunicorn's own errors as problem+json, the API docs' access, and beat's scheduler."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jwt
import pytest
from django.test import Client

from serenity.sandbox.ims import keys
from tests.api.conftest import CALLER_ORG, Api, make_brand, make_org
from tests.test_settings import manage, production_env

ROOT = Path(__file__).resolve().parent.parent


# --- No implicit environment ------------------------------------------------------------------------------

def test_a_process_without_serenity_environment_refuses_to_start_naming_it():
    env = {k: v for k, v in production_env().items() if k != "SERENITY_ENVIRONMENT"}

    result = manage(env, "check")

    assert result.returncode == 1
    assert "SERENITY_ENVIRONMENT must be set" in result.stderr.strip().splitlines()[-1]


def test_check_deploy_fails_when_the_simulators_would_be_mounted(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DJANGO_SETTINGS_MODULE": "serenity.settings",
           "SERENITY_ENVIRONMENT": "local", "SERENITY_VAR_DIR": str(tmp_path)}

    result = manage(env, "check", "--deploy")

    assert result.returncode == 1
    assert "serenity.E002" in result.stderr and "must never be deployed" in result.stderr


# --- Key set fetches -----------------------------------------------------------------------------------------

def test_a_hundred_bearers_with_unknown_key_ids_fetch_the_key_set_at_most_once_per_interval(sims, monkeypatch):
    from serenity import auth

    fetches = []
    original = jwt.PyJWKClient.fetch_data
    monkeypatch.setattr(jwt.PyJWKClient, "fetch_data", lambda self: fetches.append(1) or original(self))
    auth._jwks_client.cache_clear()
    foreign = keys.new_rsa_key()
    claims = {"user_id": "u1", "org_ids": [CALLER_ORG], "iss": "ims-sandbox", "aud": "serenity-ui",
              "exp": int(time.time()) + 600}

    statuses = set()
    for _ in range(100):
        token = jwt.encode(claims, foreign, algorithm="RS256", headers={"kid": uuid.uuid4().hex})
        statuses.add(Api(token).poll(uuid.uuid4(), uuid.uuid4(), uuid.uuid4()).status_code)

    assert statuses == {401}
    assert len(fetches) == 1  # the first fetch starts the interval; no unknown kid may force another in it
    auth._jwks_client.cache_clear()


# --- Pathological bodies ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("body", ["[" * 1000, "[" * 1000 + "]" * 1000, '{"a":' * 50 + "1" + "}" * 50])
def test_a_deeply_nested_body_is_a_400_problem_without_a_traceback(sims, bearer, body, caplog):
    org = make_org(CALLER_ORG)
    brand = make_brand(org, "Acme")
    token = bearer(user_id="u1", org_ids=[CALLER_ORG])

    response = Client().post(f"/v2/orgs/{org.id}/brands/{brand.id}/serenity/markets", body,
                             content_type="application/json", headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "malformed_request"
    assert not [r for r in caplog.records if r.exc_info]


# --- Admin logins ------------------------------------------------------------------------------------------------

def test_admin_logins_are_locked_out_after_repeated_failures(db, django_user_model):
    django_user_model.objects.create_superuser("ops", "ops@example.com", "the-right-password")
    client = Client()

    for _ in range(5):
        client.post("/admin/login/", {"username": "ops", "password": "wrong"})
    locked = client.post("/admin/login/", {"username": "ops", "password": "the-right-password"})

    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session


# --- The API docs --------------------------------------------------------------------------------------------

def test_the_api_docs_need_a_staff_session_unless_made_public(db, settings, admin_client):
    settings.API_DOCS_PUBLIC = False

    assert Client().get("/api/schema").status_code == 403
    assert Client().get("/api/docs").status_code == 403
    assert admin_client.get("/api/schema").status_code == 200
    settings.API_DOCS_PUBLIC = True
    assert Client().get("/api/schema").status_code == 200


# --- gunicorn's own answers ----------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_gunicorn_answers_a_request_it_refuses_with_problem_json(tmp_path):
    port = free_port()
    env = {**os.environ, "PORT": str(port), "WEB_CONCURRENCY": "1", "DJANGO_SETTINGS_MODULE": "tests.settings"}
    server = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-c", "python:serenity.gunicorn",
                               "--bind", f"127.0.0.1:{port}", "serenity.wsgi:application"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "gunicorn did not start"
                time.sleep(0.2)

        long_line = raw_request(port, b"GET /" + b"a" * 4200 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        many_headers = raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" +
                                   b"".join(b"X-%d: y\r\n" % i for i in range(200)) + b"\r\n")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)

    for answer, status in ((long_line, 400), (many_headers, 431)):
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(f"HTTP/1.1 {status} ".encode())
        assert b"Content-Type: application/problem+json" in head
        assert json.loads(body)["status"] == status
        assert b"aaaa" not in body and b"<html" not in body


# --- Beat ----------------------------------------------------------------------------------------------------

def test_beat_keeps_its_schedules_in_the_database_and_runs_the_probe_itself(transactional_db, queues, metric_lines):
    from django_celery_beat.models import PeriodicTask

    import jobs.tasks  # noqa: F401  (registers the tasks, as `celery beat` does when it starts)
    from serenity.beat import Scheduler
    from serenity.celery import app
    scheduler = Scheduler(app=app, lazy=False)
    stored = {t.name: t for t in PeriodicTask.objects.all()}

    assert {"sweep-unsent-jobs", "probe-stuck-jobs", "purge-expired-jobs"} <= set(stored)
    assert stored["purge-expired-jobs"].crontab is not None  # daily, at a fixed time, whatever the restarts
    scheduler.apply_async(scheduler.schedule["probe-stuck-jobs"])
    assert [line for line in metric_lines if "StuckInProgressJobs" in line]
    assert queues.drain() == []  # nothing went through the job queue


def test_beats_maintenance_tasks_go_to_their_own_queue(transactional_db, queues):
    from django.conf import settings

    from jobs.tasks import sweep_unsent_task

    sweep_unsent_task.apply_async()

    assert queues.drain() == []
    assert [m["task"] for m in queues.drain(settings.MAINTENANCE_QUEUE_URL)] == ["jobs.sweep_unsent"]
