"""The OpenAPI contract says what the server enforces: schemathesis, with every check on, against the live test
server and the committed docs/openapi.yaml, reaching every operation with real organization, brand, market and
job ids. A schema-valid request the server refuses, a schema-invalid one it accepts, an undocumented status,
content type or header, a 5xx: each is a failure.

A forwarded promise token is single-use (IMS rotates it on every exchange), so no fixed value could serve the run:
generated values are exchanged and refused (401, which the contract documents), and the calls that leave the
header out act with the bearer and succeed.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from markets.generation.jobtype import generation_job_id
from tests.markets.factories import MarketFactory
from tests.markets.generation.conftest import CALLER_ORG, REQUESTER, make_brand, make_job, make_org, needs_reauth_fields

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "docs" / "openapi.yaml"
ST = Path(sys.executable).parent / "st"


def test_the_committed_schema_is_a_valid_openapi_document():
    spec, _ = read_from_filename(str(SCHEMA))
    validate(spec)


@pytest.fixture
def world(sims, bearer, settings, queues):
    settings.SERENITY_ASYNC_PROMPT_GEN = "true"
    token = bearer(user_id=REQUESTER, org_ids=[CALLER_ORG])
    org = make_org(CALLER_ORG)
    brand = make_brand(org, "Fuzzed", workspace_token=token)
    market = MarketFactory(
        brand=brand,
        site=brand.base_site,
        country="FR",
        language_code="fr",
        geo_target_id=2250,
        semrush_project_id="prj-fuzzed-fr",
    )
    # The market deleteMarket deletes (its project is not in Semrush: a 404 there is success), FR stays for the rest.
    MarketFactory(brand=brand, country="ES", language_code="es", geo_target_id=2724, semrush_project_id="prj-fuzzed-es")
    job = make_job(
        org=org, brand=brand, site=brand.base_site, id=generation_job_id(brand.id, 2250, "fr"), **needs_reauth_fields()
    )
    return {"token": token, "org": org, "brand": brand, "market": market, "job": job}


def test_every_operation_keeps_the_contract_under_fuzzing(world, sims, tmp_path):
    config = tmp_path / "schemathesis.toml"
    config.write_text(f"""
[parameters]
"path.orgId" = "{world["org"].id}"
"path.brandId" = "{world["brand"].id}"
"path.marketId" = "{world["market"].id}"
"path.jobId" = "{world["job"].id}"
"path.geoTargetId" = 2250
"path.languageCode" = "fr"

[[operations]]
include-operation-id = "deleteMarket"
parameters = {{ "path.geoTargetId" = 2724, "path.languageCode" = "es" }}

# An activation creates up to 50 markets, each with its Semrush calls: the coverage phase's hundreds of
# boundary cases would take minutes. Activation is fuzzed and walked statefully like every operation.
[[operations]]
include-operation-id = "activateMarkets"
phases.coverage.enabled = false
""")
    result = subprocess.run(
        [
            str(ST),
            "--config-file",
            str(config),
            "run",
            str(SCHEMA),
            "--url",
            sims.url,
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {world['token']}",
            "--max-examples",
            "10",
            "--seed",
            "20261130",
            "--max-response-time",
            "25",
            "--workers",
            "2",
            "--no-color",
            "--report",
            "har",
            "--report-har-path",
            str(tmp_path / "run.har"),
            "--request-timeout",
            "30",
            "--output-truncate",
            "false",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "SCHEMATHESIS_HOOKS": "tests.serenity.schemathesis_hooks",
            "SERENITY_FUZZ_SITE_ID": str(world["brand"].base_site_id),
            "PYTHONPATH": str(ROOT),
        },
    )

    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    # Every operation was reached with the real ids and answered a success at least once, not only 4xx.
    entries = json.loads((tmp_path / "run.har").read_text())["log"]["entries"]
    succeeded = {
        operation(e["request"]["method"], e["request"]["url"]) for e in entries if 200 <= e["response"]["status"] < 300
    }
    assert succeeded >= {
        "createBrand",
        "createMarket",
        "activateMarkets",
        "getGenerationJob",
        "reauthorizeGenerationJob",
        "regenerateMarketPrompts",
        "listMarkets",
        "getMarket",
        "deleteMarket",
        "listLanguages",
        "listModels",
    }


def operation(method: str, url: str) -> str | None:
    """The operationId a request of the run addressed."""
    path = url.split("/v2/", 1)[-1].split("?")[0]
    for name, verb, pattern in OPERATIONS:
        if method == verb and re.fullmatch(pattern, path):
            return name
    return None


UUID = "[0-9a-f-]{36}"
OPERATIONS = [
    ("createBrand", "POST", f"orgs/{UUID}/brands"),
    ("createMarket", "POST", f"orgs/{UUID}/brands/{UUID}/serenity/markets"),
    ("listMarkets", "GET", f"orgs/{UUID}/brands/{UUID}/serenity/markets"),
    ("getMarket", "GET", f"orgs/{UUID}/brands/{UUID}/serenity/markets/[0-9]+/[A-Za-z-]+"),
    ("deleteMarket", "DELETE", f"orgs/{UUID}/brands/{UUID}/serenity/markets/[0-9]+/[A-Za-z-]+"),
    ("listLanguages", "GET", f"orgs/{UUID}/serenity/languages"),
    ("listModels", "GET", f"orgs/{UUID}/serenity/models"),
    ("activateMarkets", "POST", f"orgs/{UUID}/brands/{UUID}/serenity/activate"),
    ("getGenerationJob", "GET", f"orgs/{UUID}/brands/{UUID}/serenity/markets/generation/jobs/{UUID}"),
    ("reauthorizeGenerationJob", "POST", f"orgs/{UUID}/brands/{UUID}/serenity/markets/generation/jobs/{UUID}/reauth"),
    ("regenerateMarketPrompts", "POST", f"orgs/{UUID}/brands/{UUID}/serenity/markets/{UUID}/generation"),
]


def test_a_client_generated_from_the_schema_creates_a_market_and_polls_its_job(world, sims, tmp_path, monkeypatch):
    """openapi-python-client, a maintained generator, turns docs/openapi.yaml into a typed client; the client
    talks to the live server and parses its answers into its own models."""
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [
            str(bin_dir / "openapi-python-client"),
            "generate",
            "--path",
            str(SCHEMA),
            "--meta",
            "none",
            "--output-path",
            str(tmp_path / "serenity_client"),
        ],
        cwd=tmp_path,
        check=True,
        timeout=120,
        capture_output=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from serenity_client import AuthenticatedClient
    from serenity_client.api.generation_jobs import get_generation_job
    from serenity_client.api.v2 import create_market
    from serenity_client.models import CreateMarketRequestType0, GenerationJob, MarketCreatedOutput

    client = AuthenticatedClient(base_url=sims.url, token=world["token"])
    # The body is one of two models, by which of brandDomain or siteId names the market's domain.
    created = create_market.sync(
        client=client,
        org_id=world["org"].id,
        brand_id=world["brand"].id,
        body=CreateMarketRequestType0.from_dict(
            {
                "market": "de",
                "languageCode": "DE",
                "brandDomain": world["brand"].domain,
                "brandNames": [world["brand"].name],
            }
        ),
    )
    polled = get_generation_job.sync(
        client=client, org_id=world["org"].id, brand_id=world["brand"].id, job_id=world["job"].id
    )

    assert isinstance(created, MarketCreatedOutput) and (created.market, created.language_code) == ("DE", "de")
    assert isinstance(polled, GenerationJob)
    assert (str(polled.job_id), polled.status.value, polled.error.code) == (
        str(world["job"].id),
        "FAILED",
        "NEEDS_REAUTH",
    )
