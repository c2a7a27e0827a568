"""The OpenAPI contract: generated from the code, committed at docs/openapi.yaml, served with offline Swagger UI."""

import re

import yaml

from scripts import export_openapi
from serenity import routes


def schema() -> dict:
    return yaml.safe_load(export_openapi.generate())


def test_the_committed_schema_matches_the_code():
    committed = export_openapi.SCHEMA_FILE.read_bytes() if export_openapi.SCHEMA_FILE.exists() else b""

    diff = export_openapi.drift(export_openapi.generate(), committed)

    assert not diff, (
        f"docs/openapi.yaml has drifted from the code: run `{export_openapi.REGENERATE}` and commit the file.\n"
        + diff[:6000]
    )


def test_every_product_route_is_in_the_schema():
    def as_openapi(route: str) -> str:
        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)

    product = {as_openapi(p.route) for p in routes.route_parameters() if p.route.startswith("v2/")}

    assert product - set(schema()["paths"]) == set()


def test_the_poll_documents_the_job_dto_and_problem_details():
    doc = schema()
    poll = doc["paths"]["/v2/orgs/{orgId}/brands/{brandId}/serenity/markets/generation/jobs/{jobId}"]["get"]

    assert poll["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/GenerationJob"
    }
    assert set(poll["responses"]["200"]["headers"]) == {"ETag", "Retry-After"}
    assert "content" not in poll["responses"]["304"]
    assert poll["responses"]["404"]["content"]["application/problem+json"]["schema"] == {
        "$ref": "#/components/schemas/Problem"
    }
    assert set(doc["components"]["schemas"]["GenerationJob"]["properties"]) == {
        "jobId",
        "jobType",
        "status",
        "result",
        "error",
        "createdAt",
        "updatedAt",
        "progress",
    }
    assert poll["security"] == [{"imsBearer": []}, {"sessionToken": []}, {"sessionCookie": []}]


def test_the_reauth_documents_its_headers_and_every_answer():
    post = schema()["paths"]["/v2/orgs/{orgId}/brands/{brandId}/serenity/markets/generation/jobs/{jobId}/reauth"][
        "post"
    ]

    headers = {p["name"]: p for p in post["parameters"] if p["in"] == "header"}
    assert headers["x-promise-audience"]["required"] is True
    assert headers["x-promise-audience"]["schema"]["enum"] == ["semrush"]
    assert "x-promise-token" in headers
    assert set(post["responses"]) == {"202", "400", "401", "403", "404", "409", "429", "502"}


def test_the_schema_is_served_without_a_bearer(client):
    response = client.get("/api/schema")

    assert response.status_code == 200
    assert b"/generation/jobs/{jobId}/reauth" in response.content


def test_swagger_ui_is_served_with_local_assets_only(client):
    response = client.get("/api/docs")

    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert not re.search(r"(src|href)=\"https?://", page)
    asset = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200 and b"SwaggerUIBundle" in b"".join(asset.streaming_content)
