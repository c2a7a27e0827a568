"""Browsers on other origins (SPEC §3 "Browsers"): every API route answers a preflight without
authentication, as the original does, and answers carry the allowed origin."""

import httpx
import pytest
from django.urls import reverse

from serenity import routes

ORIGIN = "https://ui.example"


def product_paths() -> list[str]:
    """One concrete path per product route (ids filled with a UUID that names nothing)."""
    uuid = "8c24224f-d559-478d-a546-9b3f04cc3f78"
    paths = set()
    for parameter in routes.route_parameters():
        if parameter.route.startswith("v2/"):
            path = parameter.route
            for name in ("orgId", "brandId", "jobId", "marketId"):
                path = path.replace(f"<str:{name}>", uuid)
            path = path.replace("<str:geoTargetId>", "2250").replace("<str:languageCode>", "fr")
            paths.add("/" + path)
    return sorted(paths)


def test_the_walk_finds_every_product_route():
    assert len(product_paths()) == 9


@pytest.mark.parametrize("path", product_paths())
def test_a_preflight_on_any_api_route_is_answered_204_without_authentication(sims, path):
    response = httpx.options(
        f"{sims.url}{path}",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-promise-token, x-promise-audience",
        },
    )

    assert (response.status_code, response.content) == (204, b"")
    assert response.headers["access-control-allow-origin"] == "*"
    allowed = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "x-promise-token", "x-promise-audience"} <= allowed
    assert {"GET", "POST", "DELETE", "OPTIONS"} <= {
        m.strip() for m in response.headers["access-control-allow-methods"].split(",")
    }
    assert response.headers["access-control-max-age"] == "86400"
    assert "access-control-allow-credentials" not in response.headers


def test_an_options_request_without_the_preflight_headers_is_also_204(client, world_org_path):
    response = client.options(world_org_path, headers={"Origin": ORIGIN})

    assert response.status_code == 204


def test_an_answer_to_another_origin_carries_the_allowed_origin_and_exposes_x_error(client, world_org_path):
    response = client.post(world_org_path, {}, content_type="application/json", headers={"Origin": ORIGIN})

    assert response.status_code == 401
    assert response["access-control-allow-origin"] == "*"
    assert "x-error" in response["access-control-expose-headers"]


def test_with_a_list_of_origins_only_those_are_allowed_and_may_send_credentials(client, world_org_path, settings):
    settings.CORS_ALLOW_ALL_ORIGINS = False
    settings.CORS_ALLOWED_ORIGINS = [ORIGIN]
    settings.CORS_ALLOW_CREDENTIALS = True

    allowed = client.options(world_org_path, headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    other = client.options(
        world_org_path, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    )

    assert (allowed["access-control-allow-origin"], allowed["access-control-allow-credentials"]) == (ORIGIN, "true")
    assert other.status_code == 204 and "access-control-allow-origin" not in other


def test_the_admin_and_the_health_checks_are_not_cors_routes(client):
    for path in (reverse("admin:index"), "/healthz"):
        response = client.get(path, headers={"Origin": ORIGIN})
        assert "access-control-allow-origin" not in response


@pytest.fixture
def world_org_path(db) -> str:
    return "/v2/orgs/8c24224f-d559-478d-a546-9b3f04cc3f78/brands"
