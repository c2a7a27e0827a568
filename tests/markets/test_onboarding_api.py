"""Entry-point behaviour beyond the flag matrix: validation, conflicts, activation batches, the old path's
shared deadline (SPEC §3, §8)."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import AsyncJob
from markets import geo
from markets.models import Brand, Market
from serenity.sandbox.semrush import controls as semrush_controls
from serenity.sandbox.semrush import state as semrush
from tests.markets.factories import BrandFactory
from tokens.models import PromiseGrant

# Countries whose ISO numeric codes make distinct geo targets, for batch activations.
COUNTRIES = ["US", "GB", "FR", "DE", "ES", "IT", "NL", "BE", "AT", "CH", "SE", "NO", "DK", "FI", "PL", "PT", "IE",
             "CZ", "SK", "HU", "RO", "BG", "GR", "HR", "SI", "EE", "LV", "LT", "LU", "MT", "CY", "IS", "CA", "MX",
             "BR", "AR", "CL", "CO", "PE", "JP", "KR", "AU", "NZ", "IN", "SG", "ZA", "TR", "IL", "AE", "SA", "EG"]


def problem(response):
    assert response["Content-Type"] == "application/problem+json"
    return response.json()


def test_the_same_slice_again_is_a_409_problem(world):
    first = world.post(world.url("markets"), {"market": "FR", "languageCode": "fr"})
    assert first.status_code == 201
    again = world.post(world.url("markets"), {"market": "FR", "languageCode": "fr"})
    assert again.status_code == 409
    body = problem(again)
    assert body == {"type": "https://errors.serenity.example/market-exists", "title": "This market is already live "
                    "for the brand", "status": 409, "detail": "FR/fr is already live.", "code": "market_exists",
                    "marketId": first.json()["id"]}
    assert Market.objects.count() == 1


@pytest.mark.parametrize(("payload", "pointer", "code"), [
    ({"market": "XX", "languageCode": "fr"}, "/market", "invalid_country"),
    ({"market": "FRA", "languageCode": "fr"}, "/market", "invalid_country"),
    ({"market": "fr", "languageCode": "fr"}, "/market", "invalid_country"),
    ({"market": " FR", "languageCode": "fr"}, "/market", "invalid_country"),
    ({"market": "FR", "languageCode": "FR"}, "/languageCode", "invalid_language"),
    ({"market": "FR", "languageCode": "zz"}, "/languageCode", "invalid_language"),
    ({"languageCode": "fr"}, "/market", "required"),
    ({"market": "FR", "languageCode": "fr", "generatePrompts": "true"}, "/generatePrompts", "invalid"),
    ({"market": "FR", "languageCode": "fr", "colour": "blue"}, "/colour", "unknown_field"),
    ({"market": "FR", "languageCode": "fr", "siteId": "not-a-uuid"}, "/siteId", "invalid"),
    ({"market": "FR", "languageCode": "fr", "siteId": "8c24224fd559478da5469b3f04cc3f78"}, "/siteId", "invalid"),
])
def test_invalid_market_input_is_a_400_problem_naming_the_field(world, payload, pointer, code):
    response = world.post(world.url("markets"), payload)
    assert response.status_code == 400
    body = problem(response)
    assert body["code"] == "invalid" and body["title"] == "Invalid request"
    assert {"pointer": pointer, "code": code} in [{k: e[k] for k in ("pointer", "code")} for e in body["errors"]]
    assert Market.objects.count() == 0


def test_a_site_of_another_brand_answers_like_a_missing_one(world):
    other = BrandFactory(organization=world.org)
    foreign = world.post(world.url("markets"), {"market": "FR", "languageCode": "fr", "siteId": str(other.base_site_id)})
    missing = world.post(world.url("markets"), {"market": "FR", "languageCode": "fr",
                                                "siteId": "8c24224f-d559-478d-a546-9b3f04cc3f78"})
    assert foreign.status_code == missing.status_code == 404
    assert problem(foreign) == problem(missing) == {
        "type": "https://errors.serenity.example/site-not-found", "title": "Site not found", "status": 404,
        "detail": "Site not found", "code": "site_not_found"}
    assert Market.objects.count() == 0


def test_a_market_can_be_attached_to_a_named_site_of_the_brand(world):
    response = world.post(world.url("markets"), {"market": "FR", "languageCode": "fr",
                                                 "siteId": str(world.brand.base_site_id)})
    assert response.status_code == 201
    assert response.json()["siteId"] == str(world.brand.base_site_id)


def test_an_organization_without_serenity_is_refused_with_403(world):
    type(world.org).objects.filter(id=world.org.id).update(is_serenity_active=False)
    for path, body in [(world.url("markets"), {"market": "FR", "languageCode": "fr"}),
                       (world.url("activate"), {"markets": [{"market": "FR", "languageCode": "fr"}]}),
                       (f"/v2/orgs/{world.org.id}/brands", {"name": "X", "domain": "x.example"})]:
        response = world.post(path, body)
        assert response.status_code == 403
        assert problem(response)["code"] == "serenity_not_active"
    assert Market.objects.count() == 0


def test_a_market_for_a_pending_brand_is_a_409(world):
    Brand.objects.filter(id=world.brand.id).update(status="pending")
    response = world.post(world.url("markets"), {"market": "FR", "languageCode": "fr"})
    assert response.status_code == 409 and problem(response)["code"] == "brand_not_active"


def test_creating_a_brand_without_a_market_makes_a_pending_brand_and_its_base_site(world):
    response = world.post(f"/v2/orgs/{world.org.id}/brands", {"name": "Fjell", "domain": "fjell.example",
                                                               "aliases": ["Fjell Gear"]})
    assert response.status_code == 201
    brand = Brand.objects.get(domain="fjell.example")
    body = response.json()
    assert body == {"id": str(brand.id), "name": "Fjell", "displayName": "Fjell", "domain": "fjell.example",
                    "primaryUrl": "", "aliases": ["Fjell Gear"], "status": "pending", "semrushWorkspaceId": None,
                    "baseSiteId": str(brand.base_site_id), "createdAt": body["createdAt"]}
    assert brand.base_site.base_url == "https://fjell.example"
    again = world.post(f"/v2/orgs/{world.org.id}/brands", {"name": "Fjell 2", "domain": "fjell.example"})
    assert again.status_code == 409 and problem(again)["code"] == "brand_exists"


def test_activating_a_pending_brand_provisions_its_workspace_only(world):
    pending = BrandFactory(organization=world.org, status="pending", semrush_workspace_id=None)
    url = f"/v2/orgs/{world.org.id}/brands/{pending.id}/serenity/activate"
    response = world.post(url, {"markets": [{"market": "FR", "languageCode": "fr"}]})
    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.status == "active" and pending.semrush_workspace_id
    assert response.json()["markets"] == [] and response.json()["brand"]["status"] == "active"
    assert Market.objects.filter(brand=pending).count() == 0
    assert semrush.workspaces(parent_id="serenity")[-1]["id"] == pending.semrush_workspace_id


@pytest.mark.parametrize(("markets", "code"), [
    ([], "min_length"),
    ([{"market": c, "languageCode": "en"} for c in COUNTRIES[:51]], "max_length"),
    ([{"market": "FR", "languageCode": "fr"}, {"market": "FR", "languageCode": "fr"}], "duplicate_market"),
])
def test_activation_needs_1_to_50_distinct_markets(world, markets, code):
    response = world.post(world.url("activate"), {"markets": markets})
    assert response.status_code == 400
    assert problem(response)["errors"][0]["code"] in (code, "empty")
    assert Market.objects.count() == 0


def test_activation_with_a_live_market_answers_207_with_201_and_409_entries(world):
    world.post(world.url("markets"), {"market": "FR", "languageCode": "fr"})
    response = world.post(world.url("activate"), {"markets": [{"market": "FR", "languageCode": "fr"},
                                                              {"market": "DE", "languageCode": "de"}]})
    assert response.status_code == 207
    entries = response.json()["markets"]
    assert [(e["market"], e["languageCode"], e["status"]) for e in entries] == [("FR", "fr", 409), ("DE", "de", 201)]
    assert entries[0]["body"]["code"] == "market_exists"
    assert entries[1]["body"]["id"] == str(Market.objects.get(country="DE").id)


def test_activation_answers_200_when_every_market_is_new(world):
    response = world.post(world.url("activate"), {"markets": [{"market": "FR", "languageCode": "fr"},
                                                              {"market": "BE", "languageCode": "nl"}]})
    assert response.status_code == 200
    assert [e["status"] for e in response.json()["markets"]] == [201, 201]


def test_a_semrush_failure_for_one_market_is_a_502_entry_and_leaves_no_market(world):
    semrush_controls.fail_next(10, status=500, path="/ai-projects", method="POST")
    response = world.post(world.url("activate"), {"markets": [{"market": "FR", "languageCode": "fr"}]})
    assert response.status_code == 207
    (entry,) = response.json()["markets"]
    assert entry["status"] == 502 and entry["body"]["code"] == "semrush_unavailable"
    assert Market.objects.count() == 0


def activation_queries(world, async_on_markets: int, dump=None) -> int:
    markets = [{"market": c, "languageCode": "en"} for c in COUNTRIES[:async_on_markets]]
    Market.objects.filter(brand=world.brand).delete()
    AsyncJob.objects.all().delete()
    PromiseGrant.objects.all().delete()
    with CaptureQueriesContext(connection) as queries:
        response = world.post(world.url("activate"), {"markets": markets, "generatePrompts": True},
                              **{"x-promise-audience": "semrush"})
    assert response.status_code == 200, response.content
    assert all("promptGeneration" in e["body"] for e in response.json()["markets"])
    if dump is not None:
        dump.extend(q["sql"] for q in queries.captured_queries)
    return len(queries)


def test_activating_50_markets_costs_a_small_constant_number_of_queries_per_market(world, async_on, settings):
    settings.MARKET_PROVISION_CONCURRENCY = 1  # every market on the request's thread, where queries are counted
    q10 = activation_queries(world, 10)
    q20 = activation_queries(world, 20)
    q50 = activation_queries(world, 50)
    per_market = (q20 - q10) / 10
    assert per_market == int(per_market) and 0 < per_market <= 20, (q10, q20, q50)
    assert q50 - q20 == 30 * per_market, (q10, q20, q50)  # linear: no per-request growth beyond the markets
    assert AsyncJob.objects.count() == 50


def test_the_old_path_shares_one_deadline_across_the_batch_and_reports_what_it_wrote(world, settings):
    settings.SYNC_WRITE_DEADLINE_SECONDS = 4.0
    settings.MARKET_PROVISION_CONCURRENCY = 1  # one after another: the later markets meet the spent deadline
    semrush_controls.set_latency(200)  # each Semrush call takes 200 ms: the first market fits, not all six
    slices = [{"market": c, "languageCode": "en"} for c in ["US", "GB", "IE", "AU", "CA", "NZ"]]
    response = world.post(world.url("activate"), {"markets": slices})
    semrush_controls.set_latency(0)
    assert response.status_code == 200
    reports = [(e["market"], e["body"]["prompts"]) for e in response.json()["markets"]]
    statuses = [p["status"] for _, p in reports]
    assert statuses[0] == "written" and "skipped" in statuses, reports
    for country, prompts in reports:
        market = Market.objects.get(brand=world.brand, country=country)
        # Nothing half-written is reported as done: the report equals what Semrush holds.
        assert len(semrush.prompts(market.semrush_project_id)) == prompts["written"], country
        if prompts["status"] == "skipped":
            assert prompts["written"] == 0
        assert market.publish_state == "published"


def test_old_path_prompts_are_tagged_branded_or_not_by_brand_and_alias_needles(world):
    semrush_controls.set_catalogue(domain=world.brand.domain, country="FR", items=[
        {"topic": "chaussures", "volume": 100, "examplePrompts": ["Nordlicht chaussures avis", "acheter chaussures",
                                                                  "  ", "chaussures Nordlicht Gear"]},
        {"topic": "sacs", "volume": "n/a", "examplePrompts": ["meilleur sac à dos"]},
    ])
    response = world.post(world.url("markets"), {"market": "FR", "languageCode": "fr"})
    assert response.status_code == 201 and response.json()["prompts"] == {"status": "written", "written": 4}
    tags = semrush.tag_values(world.brand.semrush_workspace_id)
    by_id = {tag_id: (root, value) for root, values in tags.items() for value, tag_id in values.items()}
    written = {p["text"]: sorted(by_id[t] for t in p["tagIds"])
               for p in semrush.prompts(Market.objects.get().semrush_project_id)}
    assert written == {
        "Nordlicht chaussures avis": [("intent", "commercial"), ("source", "semrush"), ("type", "branded")],
        "acheter chaussures": [("intent", "transactional"), ("source", "semrush"), ("type", "non-branded")],
        "chaussures Nordlicht Gear": [("intent", "informational"), ("source", "semrush"), ("type", "branded")],
        "meilleur sac à dos": [("intent", "commercial"), ("source", "semrush"), ("type", "non-branded")],
    }


def test_geo_target_ids_come_from_the_country_code_library(world):
    response = world.post(world.url("markets"), {"market": "US", "languageCode": "en"})
    assert response.json()["geoTargetId"] == 2840 == geo.geo_target_id("US")
