"""Caller authentication, org scoping and the problem+json shape of every error (SPEC §10; STYLE §6)."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from sandbox.ims.keys import new_rsa_key
from tests.markets.factories import OrganizationFactory

PROBLEM = "application/problem+json"


@pytest.fixture
def org(sims):
    return OrganizationFactory(ims_org_id="FEEDFACE00000000000000AA@AdobeOrg")


def post_brand(org, token=None, header=None):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    elif token is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.post(f"/v2/orgs/{org.id}/brands", {"name": "Acme", "domain": "acme.example"}, format="json")


def test_a_request_without_a_bearer_is_a_401_problem_with_www_authenticate(org):
    response = post_brand(org)
    assert response.status_code == 401
    assert response["Content-Type"] == PROBLEM
    assert response["WWW-Authenticate"] == 'Bearer realm="serenity"'
    assert response.json() == {
        "type": "https://errors.serenity.example/not-authenticated",
        "title": "Authentication required",
        "status": 401,
        "detail": "Authentication credentials were not provided.",
        "code": "not_authenticated",
        "error": "authenticationRequired",
        "message": "Authentication credentials were not provided.",
    }


INVALID = "https://errors.serenity.example/authentication-failed"


@pytest.mark.parametrize(
    "case", ["expired", "wrong_issuer", "wrong_audience", "foreign_key", "malformed", "not_bearer", "empty_bearer"]
)
def test_an_invalid_bearer_is_a_401_problem(org, bearer, case):
    header = None
    token = None
    if case == "expired":
        token = bearer(org_ids=[org.ims_org_id], ttl=-120)
    elif case == "wrong_issuer":
        token = bearer(org_ids=[org.ims_org_id], issuer="https://evil.example")
    elif case == "wrong_audience":
        token = bearer(org_ids=[org.ims_org_id], audience="another-client")
    elif case == "foreign_key":
        token = bearer(org_ids=[org.ims_org_id], key=new_rsa_key())
    elif case == "malformed":
        token = "not.a.jwt"
    elif case == "not_bearer":
        header = "Basic dXNlcjpwYXNz"
    else:
        header = "Bearer "
    response = post_brand(org, token=token, header=header)
    assert response.status_code == 401
    assert response["Content-Type"] == PROBLEM
    assert response["WWW-Authenticate"] == 'Bearer realm="serenity"'
    body = response.json()
    assert (body["type"], body["title"], body["status"], body["code"]) == (
        INVALID,
        "Invalid credentials",
        401,
        "authentication_failed",
    )
    if token:
        assert token not in response.content.decode()


def test_a_member_of_the_org_may_act_on_it(org, bearer):
    response = post_brand(org, token=bearer(org_ids=[org.ims_org_id]))
    assert response.status_code == 201


def test_a_caller_outside_the_org_is_refused_with_403(org, bearer):
    response = post_brand(org, token=bearer(org_ids=["0000000000000000000000BB@AdobeOrg"]))
    assert response.status_code == 403
    assert response["Content-Type"] == PROBLEM
    assert response.json() == {
        "type": "https://errors.serenity.example/organization-access-denied",
        "title": "User does not have access to this organization",
        "status": 403,
        "detail": "User does not have access to this organization",
        "code": "organization_access_denied",
        "error": "forbidden",
        "message": "User does not have access to this organization",
    }
    assert response["x-error"] == "User does not have access to this organization"


def test_an_unknown_org_is_a_404_problem(org, bearer):
    import uuid

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer(org_ids=[org.ims_org_id])}")
    response = client.post(f"/v2/orgs/{uuid.uuid4()}/brands", {"name": "A", "domain": "a.example"}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "organization_not_found"


def test_an_unknown_path_is_a_404_problem(db):
    response = Client().get("/v2/nothing/here")
    assert response.status_code == 404
    assert response["Content-Type"] == PROBLEM
    assert response.json()["code"] == "not_found" and response.json()["status"] == 404


@pytest.mark.parametrize("path", ["/v2/orgs/%E2%82%AC/brands", "/v2/%E6%97%A5%E6%9C%AC"])
def test_a_path_with_characters_outside_latin_1_is_answered_like_any_other_path_with_tracing_on(
    org, bearer, spans, path
):
    """Tracing rebuilds the request's URL when the server does not hand it over (Django's own servers): a path
    outside Latin-1 must not turn that into a 500."""
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer(org_ids=[org.ims_org_id])}")
    ascii_twin = client.post("/v2/orgs/not-an-org/brands" if "orgs" in path else "/v2/nothing", {}, format="json")

    response = client.post(path, {}, format="json")

    assert response.status_code == ascii_twin.status_code < 500
    assert response["Content-Type"] == PROBLEM and response.json()["code"] == ascii_twin.json()["code"]
    targets = {
        s.attributes.get("http.target"): s.attributes.get("http.status_code") for s in spans.get_finished_spans()
    }
    assert targets[path] == response.status_code  # the request's span names it as it was sent


def test_a_wrong_method_is_a_405_problem_with_allow(org, bearer):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer(org_ids=[org.ims_org_id])}")
    response = client.get(f"/v2/orgs/{org.id}/brands")
    assert response.status_code == 405
    assert response["Content-Type"] == PROBLEM
    assert response["Allow"] == "POST, OPTIONS"
    assert response.json() == {
        "type": "https://errors.serenity.example/method-not-allowed",
        "title": "Method not allowed",
        "status": 405,
        "detail": 'Method "GET" not allowed.',
        "code": "method_not_allowed",
        "error": "methodNotAllowed",
        "message": 'Method "GET" not allowed.',
    }


def test_a_malformed_json_body_is_a_400_problem(org, bearer):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer(org_ids=[org.ims_org_id])}")
    response = client.post(f"/v2/orgs/{org.id}/brands", data="{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "malformed_request"


@pytest.mark.urls("tests.boom_urls")
@pytest.mark.parametrize("path", ["/boom/plain", "/boom/api"])
def test_an_unexpected_error_is_a_generic_500_problem_that_leaks_nothing(db, path, caplog):
    response = Client(raise_request_exception=False).get(path, HTTP_X_REQUEST_ID="req-12345678")
    assert response.status_code == 500
    assert response["Content-Type"] == PROBLEM
    assert response.json() == {
        "type": "https://errors.serenity.example/internal-error",
        "title": "Internal server error",
        "status": 500,
        "code": "internal_error",
        "error": "internalServerError",
        "message": "Internal server error",
        "requestId": "req-12345678",
    }
    assert response["X-Request-Id"] == "req-12345678"
    assert b"hunter2" not in response.content and b"abc123" not in response.content
    logged = [r for r in caplog.records if r.levelname == "ERROR"]
    assert logged and all(getattr(r, "request_id", None) in (None, "req-12345678") for r in logged)


@pytest.mark.urls("tests.boom_urls")
@pytest.mark.django_db(transaction=True)
def test_a_request_whose_database_connection_is_cut_is_a_retryable_503_not_a_500():
    from django.db import connection

    response = Client(raise_request_exception=False).get("/boom/database", HTTP_X_REQUEST_ID="req-12345678")
    connection.close()  # the request's connection died under it; the test's teardown needs a fresh one
    assert response.status_code == 503
    assert response["Content-Type"] == PROBLEM
    assert response["Retry-After"] == "1"
    doc = response.json()
    assert (doc["code"], doc["error"], doc["status"]) == ("database_unavailable", "serviceUnavailable", 503)


def test_health_endpoints_need_no_authentication(db, moto_server):
    assert Client().get("/healthz").json() == {"status": "ok"}
    ready = Client().get("/readyz")
    assert ready.status_code == 200
    # The API's readiness is the database only: a broker hiccup must not take the API out of service.
    assert ready.json() == {"status": "ok", "checks": {"database": "ok"}}


def test_readiness_holds_when_the_database_dropped_the_idle_connections(live_server, transactional_db):
    """A restart or failover kills the connections a process keeps idle; the database itself is up, so
    /readyz must not take the API out of service for connections that are replaced on the spot."""
    import httpx

    from tests.failover import terminate_every_other_backend

    url = f"{live_server.url}/readyz"
    assert httpx.get(url).status_code == 200  # the server's thread now holds or pools a connection
    assert terminate_every_other_backend() >= 1

    answers = [httpx.get(url) for _ in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 200]
    assert answers[0].json() == {"status": "ok", "checks": {"database": "ok"}}
