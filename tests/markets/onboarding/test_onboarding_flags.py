"""The flag matrix at each of the three entry points (SPEC §3, §4, §8; issue: onboarding)."""

import json

import pytest

from jobs.models import AsyncJob
from markets.generation.jobtype import generation_job_id
from markets.models import Brand, Market
from sandbox.ims import ledger
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tokens.models import PromiseGrant

ENTRY_POINTS = ["create_market", "activate", "create_brand"]
SEMRUSH = {"x-promise-audience": "semrush"}


def call(world, entry, *, generate=None, headers=None):
    """Call one entry point for the DE/de slice; returns (response, the market's body, the brand)."""
    extra = {} if generate is None else {"generatePrompts": generate}
    headers = headers or {}
    if entry == "create_market":
        r = world.post(
            world.url("markets"), {**world.brand_fields, "market": "DE", "languageCode": "de", **extra}, **headers
        )
        return r, r.json(), world.brand
    if entry == "activate":
        r = world.post(
            world.url("activate"),
            {**world.brand_fields, "markets": [{"market": "DE", "languageCode": "de"}], **extra},
            **headers,
        )
        entry_body = r.json()["markets"][0]
        assert (entry_body["market"], entry_body["languageCode"], entry_body["status"]) == ("DE", "de", 201)
        return r, entry_body["body"], world.brand
    r = world.post(
        f"/v2/orgs/{world.org.id}/brands",
        {
            "name": "Fjell Gear",
            "urls": [{"value": "https://fjell.example"}],
            "brandAliases": ["Fjell"],
            "semrushModelIds": ["gpt-5-mini"],
            "semrushMarket": {"market": "DE", "languageCode": "de"},
            **extra,
        },
        **headers,
    )
    body = r.json()["market"]
    # The original's place for the handle is the top of createBrand's answer; the market carries it too.
    assert r.json().get("promptGeneration") == body.get("promptGeneration")
    return r, body, Brand.objects.get(domain="fjell.example")


EXPECTED_STATUS = {"create_market": 201, "activate": 200, "create_brand": 201}


def assert_market_live(body, brand):
    market = Market.objects.get(brand=brand, country="DE", language_code="de")
    assert body["id"] == str(market.id)
    assert (body["market"], body["languageCode"], body["geoTargetId"]) == ("DE", "de", 2276)
    assert body["projectId"] == market.semrush_project_id and body["publishState"] == "published"
    project = semrush.project(market.semrush_project_id)
    assert project["published"] is True and (project["geoTargetId"], project["languageCode"]) == (2276, "de")
    return market


def assert_old_path(response, body, brand):
    assert b"promptGeneration" not in response.content
    market = assert_market_live(body, brand)
    written = semrush.prompts(market.semrush_project_id)
    assert body["prompts"] == {"status": "written", "written": len(written)} and len(written) > 0
    tags = semrush.tag_values(brand.semrush_workspace_id)
    for prompt in written:
        assert tags["source"]["semrush"] in prompt["tagIds"]
        assert any(t in prompt["tagIds"] for t in tags["type"].values())
        assert any(t in prompt["tagIds"] for t in tags["intent"].values())
        assert prompt["createdBy"] == "user-1"
    assert "origin" not in tags  # the old path never claims AI origin
    assert AsyncJob.objects.count() == 0 and ledger.count(ledger.MINTED) == 0


def assert_no_job(response, body, brand, queues):
    """Flag on, but no job: the answer is the flag-on answer minus the handle, and nothing left."""
    assert b"promptGeneration" not in response.content
    assert "prompts" not in body
    market = assert_market_live(body, brand)
    assert semrush.prompts(market.semrush_project_id) == []
    assert AsyncJob.objects.count() == 0 and PromiseGrant.objects.count() == 0
    assert queues.drain() == []
    assert ledger.count(ledger.MINTED) == 0


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_flag_off_runs_the_old_synchronous_path(world, entry, queues):
    response, body, brand = call(world, entry, generate=True, headers=SEMRUSH)
    assert response.status_code == EXPECTED_STATUS[entry], response.content
    assert_old_path(response, body, brand)
    assert queues.drain() == []


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_flag_on_without_generate_prompts_runs_the_old_synchronous_path(world, async_on, entry, queues):
    response, body, brand = call(world, entry, headers=SEMRUSH)
    assert response.status_code == EXPECTED_STATUS[entry], response.content
    assert_old_path(response, body, brand)
    assert queues.drain() == []


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("value", ["false", "TRUE", None, "yes"])
def test_flag_on_with_the_consumer_not_ready_creates_the_market_without_a_job(
    world, async_on, gate, entry, value, queues
):
    gate(value)  # only exactly `true` counts; None: the parameter is missing
    response, body, brand = call(world, entry, generate=True, headers=SEMRUSH)
    assert response.status_code == EXPECTED_STATUS[entry], response.content
    assert_no_job(response, body, brand, queues)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_flag_on_with_no_catalogue_seeds_creates_the_market_without_a_job(world, async_on, entry, queues):
    for domain in ("nordlicht-outdoor.example", "fjell.example"):
        semrush_controls.set_catalogue(
            domain=domain,
            country="DE",
            items=[{"topic": None, "volume": 900, "examplePrompts": ["orphan"]}, {"topic": "  ", "volume": 5}],
        )
    response, body, brand = call(world, entry, generate=True, headers=SEMRUSH)
    assert response.status_code == EXPECTED_STATUS[entry], response.content
    assert_no_job(response, body, brand, queues)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_flag_on_with_the_default_pair_refuses_the_job_before_minting(world, async_on, entry, queues, caplog):
    response, body, brand = call(world, entry, generate=True)  # no x-promise-audience: default pair
    assert response.status_code == EXPECTED_STATUS[entry], response.content
    assert_no_job(response, body, brand, queues)
    assert any(getattr(r, "reason", None) == "PROMISE_PAIR_REQUIRED" for r in caplog.records)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_flag_on_with_an_unknown_promise_audience_is_a_400_and_creates_nothing(world, async_on, entry, queues):
    response, _, _ = (
        (
            world.post(
                world.url("markets"),
                {**world.brand_fields, "market": "DE", "languageCode": "de", "generatePrompts": True},
                **{"x-promise-audience": "photoshop"},
            ),
            None,
            None,
        )
        if entry == "create_market"
        else (
            world.post(
                world.url("activate"),
                {**world.brand_fields, "markets": [{"market": "DE", "languageCode": "de"}], "generatePrompts": True},
                **{"x-promise-audience": "photoshop"},
            ),
            None,
            None,
        )
        if entry == "activate"
        else (
            world.post(
                f"/v2/orgs/{world.org.id}/brands",
                {
                    "name": "Fjell",
                    "urls": ["https://fjell.example"],
                    "generatePrompts": True,
                    "semrushModelIds": ["gpt-5-mini"],
                    "semrushMarket": {"market": "DE", "languageCode": "de"},
                },
                **{"x-promise-audience": "photoshop"},
            ),
            None,
            None,
        )
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert (response.json()["code"], response.json()["error"]) == ("invalid_promise_audience", "invalidRequest")
    assert response.json()["message"] == "Unknown promise audience: photoshop"
    assert Market.objects.count() == 0 and AsyncJob.objects.count() == 0
    assert not Brand.objects.filter(domain="fjell.example").exists()


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_flag_on_happy_path_queues_one_job_with_a_handle(world, async_on, entry, queues):
    response, body, brand = call(world, entry, generate=True, headers=SEMRUSH)
    assert response.status_code == EXPECTED_STATUS[entry], response.content
    market = assert_market_live(body, brand)
    job_id = str(generation_job_id(brand.id, 2276, "de"))
    assert body["promptGeneration"] == {"jobId": job_id, "status": "provisioning", "reused": False}
    assert "prompts" not in body
    assert semrush.prompts(market.semrush_project_id) == []

    job = AsyncJob.objects.get(id=job_id)
    assert (job.status, job.job_type, job.user_id) == ("IN_PROGRESS", "generateSemrushMarket", "user-1")
    assert (job.organization_id, job.brand_id, job.site_id) == (world.org.id, brand.id, brand.base_site_id)
    assert job.message_sent_at is not None
    params = job.params
    assert params["market"] == "DE" and params["languageCode"] == "de" and params["geoTargetId"] == 2276
    assert params["brand"] == brand.display_name and params["imsOrgId"] == world.org.ims_org_id
    assert params["workspaceId"] == brand.semrush_workspace_id and params["count"] == 50
    assert 0 < len(params["seeds"]) <= 50 and all(len(s["examplePrompts"]) <= 10 for s in params["seeds"])
    volumes = [s["volume"] for s in params["seeds"]]
    assert volumes == sorted(volumes, reverse=True)
    assert world.token not in json.dumps(params)

    grant = PromiseGrant.objects.get(job_id=job_id)
    assert grant.pair == "semrush"
    assert ledger.count(ledger.MINTED) == 1
    (message,) = queues.drain()
    assert (message["task"], message["args"], message["kwargs"]) == (
        "jobs.run",
        [],
        {"jobId": job_id, "type": "generateSemrushMarket"},
    )
    assert world.token not in message["raw"] and "promise" not in message["raw"].lower()
