"""Production hardening: no implicit environment, bounded key-set fetches, pathological bodies, throttles,
admin login limits, gunicorn's own errors as problem+json, the API docs' access, and beat's scheduler."""

import json
import os
import socket
import time
import uuid
from pathlib import Path

import httpx
import jwt
import pytest
from django.conf import settings
from django.test import Client

from sandbox.ims import keys
from tests.markets.generation.conftest import CALLER_ORG, Api, make_brand, make_org
from tests.serenity.test_settings import manage, production_env
from tests.servers import gunicorn

ROOT = Path(__file__).resolve().parents[2]


# --- No implicit environment ------------------------------------------------------------------------------


def test_a_process_without_serenity_environment_refuses_to_start_naming_it():
    env = {k: v for k, v in production_env().items() if k != "SERENITY_ENVIRONMENT"}

    result = manage(env, "check")

    assert result.returncode == 1
    assert "SERENITY_ENVIRONMENT must be set" in result.stderr.strip().splitlines()[-1]


def test_check_deploy_fails_when_the_simulators_would_be_mounted(tmp_path):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "serenity.settings",
        "SERENITY_ENVIRONMENT": "local",
        "SERENITY_VAR_DIR": str(tmp_path),
    }

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
    claims = {
        "user_id": "u1",
        "org_ids": [CALLER_ORG],
        "iss": "ims-sandbox",
        "aud": "serenity-ui",
        "exp": int(time.time()) + 600,
    }

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

    response = Client().post(
        f"/v2/orgs/{org.id}/brands/{brand.id}/serenity/markets",
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )

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

    refused = [Client().get("/api/schema"), Client().get("/api/docs"), Client().get("/api/docs?script=")]
    assert [r.status_code for r in refused] == [403, 403, 403]
    for answer in refused:  # the content type says what the body is: a problem document, whatever the view renders
        assert answer["Content-Type"] == "application/problem+json"
        assert json.loads(answer.content)["status"] == 403
    assert admin_client.get("/api/schema").status_code == 200
    settings.API_DOCS_PUBLIC = True
    assert Client().get("/api/schema").status_code == 200


# --- Debug pages and Content-Security-Policy --------------------------------------------------------------------


def test_a_deployment_refuses_to_start_with_debug_on():
    result = manage(production_env(DEBUG="true"), "check")

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: DEBUG must be off "
        "when SERENITY_ENVIRONMENT='production' (it is for local runs)."
    )


@pytest.mark.parametrize("key", ["short", "x" * 49, "ab" * 40, "abcd" * 20], ids=["short", "49", "2 chars", "4 chars"])
def test_a_deployment_refuses_a_weak_secret_key(key):
    """Django's own rule (security.W009: at least 50 characters, at least 5 distinct), refused, not warned."""
    result = manage(production_env(SECRET_KEY=key), "check")

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: SECRET_KEY must be at least 50 characters long with at "
        "least 5 distinct characters when SERENITY_ENVIRONMENT='production'."
    )
    assert key not in result.stderr


def test_a_deployment_starts_with_a_strong_secret_key():
    assert manage(production_env(SECRET_KEY="abcde" * 10), "check").returncode == 0


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in (part.strip() for part in header.split(";")) if d}


def test_every_answer_of_the_api_carries_a_policy_that_lets_nothing_load(db, settings):
    settings.API_DOCS_PUBLIC = True
    answers = [
        Client().get("/healthz"),
        Client().get("/v2/orgs/x/brands"),
        Client().post("/v2/orgs/x/brands"),
        Client().get("/v2/nowhere"),
        Client().get("/api/schema"),
        Client().options("/v2/orgs/x/brands"),
    ]

    for answer in answers:
        assert policy(answer)["default-src"] == ["'none'"], answer.request["PATH_INFO"]
        assert policy(answer)["frame-ancestors"] == ["'none'"]


def test_the_admin_and_the_api_docs_may_load_their_own_assets_and_run_no_inline_script(db, settings, admin_client):
    settings.API_DOCS_PUBLIC = True

    pages = [
        Client().get("/admin/login/"),
        admin_client.get("/admin/"),
        admin_client.get("/admin/jobs/asyncjob/"),
        Client().get("/api/docs"),
        Client().get("/api/docs?script="),
        Client().get("/static/admin/css/base.css"),
    ]

    for page in pages:
        directives = policy(page)
        assert page.status_code == 200, page.request["PATH_INFO"]
        assert directives["script-src"] == ["'self'"] and directives["default-src"] == ["'self'"]
        assert directives["frame-ancestors"] == ["'none'"] and directives["object-src"] == ["'none'"]
    assert b"<script src=" in pages[3].content and b"<script>" not in pages[3].content


# --- gunicorn's own answers ----------------------------------------------------------------------------------


def raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_gunicorn_answers_a_request_it_refuses_with_problem_json(tmp_path):
    with gunicorn(tmp_path) as server:
        port = server.port
        long_line = raw_request(port, b"GET /" + b"a" * 4200 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        many_headers = raw_request(
            port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(200)) + b"\r\n"
        )

    for answer, status in ((long_line, 400), (many_headers, 431)):
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(f"HTTP/1.1 {status} ".encode())
        assert b"Content-Type: application/problem+json" in head
        assert json.loads(body)["status"] == status
        assert b"aaaa" not in body and b"<html" not in body


def test_tokens_sent_in_any_part_of_a_request_to_any_route_reach_no_log_line(tmp_path, sims, bearer):
    """A bearer, a session token and promise tokens sent in the Authorization header, `x-promise-token`, the
    query string (access_token-like names), cookies and the body, to every route, valid and not: every line
    gunicorn writes (its access log, Django's request warnings, the product's own lines) is scrubbed."""
    from urllib.parse import quote

    from sandbox.ims.sessions import issue_session_token
    from tests.markets.generation.conftest import make_job
    from tokens.clients import ims as ims_client
    from tokens.pairs import get_pair

    org = make_org(CALLER_ORG)
    brand = make_brand(org, "Leak")
    job = make_job(org=org, brand=brand, site=brand.base_site)
    member = bearer(user_id="user-1", org_ids=[CALLER_ORG])
    tokens = {
        "bearer": member,
        "expired": bearer(user_id="user-1", org_ids=[CALLER_ORG], ttl=-60),
        "session": issue_session_token(user_id="user-1", org_ids=[CALLER_ORG]),
        "promise": ims_client.mint(bearer=member, pair=get_pair("semrush")).promise_token,
        "opaque": "opaque-secret-" + uuid.uuid4().hex,
    }
    scope = f"/v2/orgs/{org.id}/brands/{brand.id}/serenity"
    routes = [
        "/healthz",
        "/readyz",
        f"/v2/orgs/{org.id}/brands",
        f"{scope}/markets",
        f"{scope}/activate",
        f"{scope}/markets/generation/jobs/{job.id}",
        f"{scope}/markets/generation/jobs/{job.id}/reauth",
        f"{scope}/markets/{uuid.uuid4()}/generation",
        "/admin/",
        "/admin/jobs/asyncjob/",
        "/api/schema",
        "/api/docs",
        "/v2/nowhere",
    ]
    sent = 0
    with gunicorn(tmp_path) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for route in routes:
            for auth in ("bearer", "expired", "session"):
                query = (
                    f"?access_token={tokens[auth]}&token={tokens['opaque']}&promise_token={tokens['promise']}"
                    f"&sessionToken={tokens['session']}"
                )
                headers = {
                    "Authorization": f"Bearer {tokens[auth]}",
                    "x-promise-token": quote(tokens["promise"]),
                    "x-promise-audience": "semrush",
                    "Cookie": f"sessionToken={tokens['session']}; sessionid={tokens['opaque']}",
                }
                body = {
                    "market": tokens["opaque"],
                    "languageCode": tokens["promise"],
                    "brandDomain": tokens[auth],
                    "brandNames": [tokens["session"]],
                    "name": tokens["opaque"],
                    "urls": [tokens["promise"]],
                }
                for method in ("GET", "POST"):
                    client.request(method, route + query, headers=headers, json=body)
                    sent += 1

    access, other = (tmp_path / "stdout.log").read_text(), (tmp_path / "stderr.log").read_text()
    assert [json.loads(line)["logger"] for line in access.splitlines()] == ["gunicorn.access"] * sent
    assert "Unauthorized: /v2/" in other and "[REDACTED]" in access  # Django's warnings were there to scrub
    for name, token in tokens.items():
        for secret in {token, token.rsplit(".", 1)[-1], quote(token)}:  # a JWT's signature alone is the secret
            assert secret not in access, f"the {name} token in the access log"
            assert secret not in other, f"the {name} token in the error log"


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

    from jobs.tasks import sweep_unsent_task

    sweep_unsent_task.apply_async()

    assert queues.drain() == []
    assert [m["task"] for m in queues.drain(settings.MAINTENANCE_QUEUE_URL)] == ["jobs.sweep_unsent"]
