"""What the entry points answer, rendered through their serializers (markets/onboarding/dto.py): the original's
fields first and in its order, and a part that did not happen absent rather than null."""

import pytest

from markets.models import Market
from markets.onboarding.activation import Activation
from markets.onboarding.brands import BrandCreated
from markets.onboarding.dto import ActivationOutput, BrandCreatedOutput, BrandOutput, market_dto
from markets.onboarding.provisioning import MarketOutcome
from tests.markets.factories import BrandFactory, MarketFactory

pytestmark = pytest.mark.django_db

# The original's createMarket answer, in its order (SerenityCreateMarketResponse), then this service's.
MARKET_KEYS = ["brandId", "geoTargetId", "languageCode", "workspaceId", "projectId", "published"]
OURS = ["id", "market", "name", "siteId", "publishState", "createdAt"]
HANDLE = {"jobId": "fb4b4490-6cba-43ac-87bb-42249acaac23", "status": "provisioning", "reused": False}


def outcome(market: Market, **parts) -> MarketOutcome:
    return MarketOutcome(
        market_as_sent=market.country, language_as_sent=market.language_code, status=201, market=market, **parts
    )


def test_a_market_without_generation_or_old_path_counts_has_only_the_fields_that_happened():
    market = MarketFactory(publish_state=Market.PublishState.PUBLISHED)

    body = market_dto(outcome(market))

    assert list(body) == MARKET_KEYS + OURS
    assert body["published"] is True and body["market"] == market.country and body["siteId"] is None


def test_a_queued_job_and_the_old_paths_counts_appear_in_the_originals_places():
    market = MarketFactory()
    sync = {"topics": 3, "written": 12, "status": "written"}

    body = market_dto(outcome(market, prompt_generation=HANDLE, sync_prompts=sync))

    assert list(body) == [*MARKET_KEYS, "topicCount", "promptCount", "promptGeneration", *OURS, "prompts"]
    assert (body["topicCount"], body["promptCount"], body["published"]) == (3, 12, False)
    assert body["promptGeneration"] == HANDLE and body["prompts"] == {"status": "written", "written": 12}


def test_a_market_not_made_answers_its_problem_document():
    problem = {"status": 409, "error": "sliceExists", "message": "The market is already live."}

    body = market_dto(MarketOutcome(market_as_sent="DE", language_as_sent="de", status=409, problem=problem))

    assert body is problem


def test_a_brand_keeps_its_profile_fields_and_fills_the_originals_defaults():
    brand = BrandFactory(profile={"origin": "ai", "vertical": "retail", "region": ["EU"]}, updated_by="")

    body = BrandOutput(brand).data

    assert list(body)[:10] == [
        "id",
        "name",
        "baseSiteId",
        "baseUrl",
        "semrushSubWorkspaceId",
        "pendingSemrushProvisioning",
        "status",
        "urls",
        "brandAliases",
        "origin",
    ]
    assert (body["origin"], body["vertical"], body["region"]) == ("ai", "retail", ["EU"])
    assert (body["description"], body["competitors"], body["brandClaimsEnabled"]) == (None, [], False)
    assert body["updatedBy"] is None and body["baseUrl"] == brand.primary_url
    assert body["brandAliases"] == [{"name": alias, "regions": []} for alias in brand.aliases]


def test_an_origin_the_original_does_not_know_answers_human():
    assert BrandOutput(BrandFactory(profile={"origin": "robot"})).data["origin"] == "human"


def test_a_created_brand_carries_its_first_market_and_its_job_after_the_brand_fields():
    market = MarketFactory()

    body = BrandCreatedOutput(BrandCreated(brand=market.brand, market=outcome(market, prompt_generation=HANDLE))).data

    assert list(body)[-3:] == ["createdAt", "market", "promptGeneration"]
    assert body["market"]["id"] == str(market.id) and body["promptGeneration"] == HANDLE
    assert "market" not in BrandCreatedOutput(BrandCreated(brand=market.brand)).data


def test_an_activation_names_the_base_site_only_when_every_market_is_live():
    brand = BrandFactory()  # with its base site
    live = outcome(MarketFactory(brand=brand))
    failed = MarketOutcome(market_as_sent="xx", language_as_sent="en", status=400, problem={"status": 400})

    all_live = ActivationOutput(Activation(status=200, brand=brand, markets=[live])).data
    partly = ActivationOutput(Activation(status=207, brand=brand, markets=[live, failed])).data

    assert list(all_live) == ["brandId", "status", "baseSiteId", "markets", "brand"]
    assert all_live["baseSiteId"] == str(brand.base_site_id) and "baseSiteId" not in partly
    assert [entry["status"] for entry in partly["markets"]] == [201, 400]
    assert partly["markets"][1] == {"market": "xx", "languageCode": "en", "status": 400, "body": {"status": 400}}
