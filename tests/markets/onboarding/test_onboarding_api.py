"""The three entry points as the original service defines them (SPEC §3): bodies, normalisation, errors,
brand upserts, activation rules; the old path's shared deadline (§8). The original's own test cases, replayed
over HTTP, are in tests/conformance/."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import AsyncJob
from markets import geo
from markets.models import Brand, Market, Site
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.markets.factories import BrandFactory, SiteFactory
from tokens.models import PromiseGrant

# Countries whose ISO numeric codes make distinct geo targets, for batch activations.
COUNTRIES = [
    "US",
    "GB",
    "FR",
    "DE",
    "ES",
    "IT",
    "NL",
    "BE",
    "AT",
    "CH",
    "SE",
    "NO",
    "DK",
    "FI",
    "PL",
    "PT",
    "IE",
    "CZ",
    "SK",
    "HU",
    "RO",
    "BG",
    "GR",
    "HR",
    "SI",
    "EE",
    "LV",
    "LT",
    "LU",
    "MT",
    "CY",
    "IS",
    "CA",
    "MX",
    "BR",
    "AR",
    "CL",
    "CO",
    "PE",
    "JP",
    "KR",
    "AU",
    "NZ",
    "IN",
    "SG",
    "ZA",
    "TR",
    "IL",
    "AE",
    "SA",
    "EG",
]


def problem(response, status: int, error: str) -> dict:
    """The problem document of `response`, checked for status, content type and the original's token."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert (body["status"], body["error"]) == (status, error), body
    return body


def brands_url(world) -> str:
    return f"/v2/orgs/{world.org.id}/brands"


# --- createMarket -----------------------------------------------------------------------------------------------


def test_the_originals_minimum_body_creates_a_market_with_the_originals_fields(world):
    response = world.post(
        world.url("markets"),
        {"market": "us", "languageCode": "en", "brandDomain": "example.com", "brandNames": ["Example"]},
    )

    assert response.status_code == 201, response.content
    market = Market.objects.get()
    body = response.json()
    assert body == {
        "brandId": str(world.brand.id),
        "geoTargetId": 2840,
        "languageCode": "en",
        "workspaceId": world.brand.semrush_workspace_id,
        "projectId": market.semrush_project_id,
        "published": True,
        "topicCount": body["topicCount"],
        "promptCount": body["promptCount"],
        "id": str(market.id),
        "market": "US",
        "name": "US-en",
        "siteId": str(world.brand.base_site_id),
        "publishState": "published",
        "createdAt": body["createdAt"],
        "prompts": body["prompts"],
    }
    assert body["promptCount"] == body["prompts"]["written"] == len(semrush.prompts(market.semrush_project_id)) > 0
    assert (market.country, market.language_code, market.domain, market.brand_names) == (
        "US",
        "en",
        "example.com",
        ["Example"],
    )
    assert semrush.project(market.semrush_project_id)["name"] == "US-en"


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        (("fr", "FR"), ("FR", "fr")),
        (("Ch", "de-CH"), ("CH", "de-ch")),
        (("IT", "IT"), ("IT", "it")),
        (("tw", "zh-TW"), ("TW", "zh-tw")),
        (("ph", "fil"), ("PH", "fil")),
    ],
)
def test_codes_are_accepted_in_any_case_and_stored_normalised(world, sent, stored):
    response = world.post(world.url("markets"), {**world.brand_fields, "market": sent[0], "languageCode": sent[1]})

    assert response.status_code == 201, response.content
    assert (response.json()["market"], response.json()["languageCode"]) == stored
    assert Market.objects.filter(country=stored[0], language_code=stored[1]).count() == 1


def test_fields_the_service_does_not_know_are_ignored(world):
    response = world.post(
        world.url("markets"),
        {
            **world.brand_fields,
            "market": "FR",
            "languageCode": "fr",
            "colour": "blue",
            "primaryUrl": "https://elsewhere.example/x",
            "generatePrompts": "yes please",
        },
    )

    assert response.status_code == 201
    assert Market.objects.get().domain == world.brand.domain  # primaryUrl is derived, never taken


def test_every_broken_rule_is_named_in_one_400_in_the_originals_words(world):
    response = world.post(
        world.url("markets"), {"name": " ", "market": "FRA", "languageCode": "fr_FR", "brandNames": []}
    )

    body = problem(response, 400, "invalidRequest")
    assert (
        body["message"]
        == body["detail"]
        == (
            "name, when provided, must be a non-empty string; market must be an ISO-2 country code; "
            "languageCode must match ^[a-z]{2,3}(-[a-z]{2,4})?$; brandDomain or siteId is required; "
            "brandNames must be a non-empty array of strings"
        )
    )
    assert [e["pointer"] for e in body["errors"]] == [
        "/name",
        "/market",
        "/languageCode",
        "/brandDomain",
        "/brandNames",
    ]
    assert Market.objects.count() == 0


def test_a_country_that_does_not_exist_is_unknown_market(world):
    body = problem(
        world.post(world.url("markets"), {**world.brand_fields, "market": "xx", "languageCode": "en"}),
        400,
        "unknownMarket",
    )
    assert body["message"] == "Unknown market 'xx'"


def test_a_language_semrush_does_not_have_is_unknown_language_and_creates_nothing(world):
    body = problem(
        world.post(world.url("markets"), {**world.brand_fields, "market": "US", "languageCode": "tlh"}),
        400,
        "unknownLanguage",
    )

    assert body["message"] == "Language 'tlh' not found"
    assert Market.objects.count() == 0 and semrush.projects(world.brand.semrush_workspace_id) == []


def test_the_same_slice_again_is_a_409_slice_exists_naming_the_live_market(world):
    first = world.post(world.url("markets"), {**world.brand_fields, "market": "FR", "languageCode": "fr"})
    again = world.post(world.url("markets"), {**world.brand_fields, "market": "fr", "languageCode": "FR"})

    body = problem(again, 409, "sliceExists")
    assert body == {
        "type": "https://errors.serenity.example/market-exists",
        "status": 409,
        "code": "market_exists",
        "title": "Brand already has a live market for this slice",
        "error": "sliceExists",
        "detail": "FR/fr is already live.",
        "message": "FR/fr is already live.",
        "marketId": first.json()["id"],
    }
    assert Market.objects.count() == 1


def test_a_market_on_a_site_of_the_brand_tracks_that_sites_domain(world):
    site = SiteFactory(organization=world.org, base_url="https://shop.nordlicht.example/de")
    site.brand = world.brand
    site.save()

    response = world.post(
        world.url("markets"),
        {"market": "DE", "languageCode": "de", "siteId": str(site.id), "brandNames": ["Nordlicht"]},
    )

    assert response.status_code == 201, response.content
    assert response.json()["siteId"] == str(site.id)
    assert Market.objects.get().domain == "shop.nordlicht.example"


@pytest.mark.parametrize("site_id", ["another brand's", "missing", "not-a-uuid"])
def test_a_site_id_that_names_no_site_of_the_brand_is_a_400(world, site_id):
    site_id = {
        "another brand's": lambda: str(BrandFactory(organization=world.org).base_site_id),
        "missing": lambda: "8c24224f-d559-478d-a546-9b3f04cc3f78",
        "not-a-uuid": lambda: "site-1",
    }[site_id]()

    response = world.post(
        world.url("markets"), {**world.brand_fields, "market": "FR", "languageCode": "fr", "siteId": site_id}
    )

    assert problem(response, 400, "invalidRequest")["message"] == "siteId did not resolve to a site domain"
    assert Market.objects.count() == 0


def test_a_brand_without_a_workspace_gets_one_when_its_first_market_is_added(world):
    brand = BrandFactory(organization=world.org, status="pending", semrush_workspace_id=None)
    response = world.post(
        f"/v2/orgs/{world.org.id}/brands/{brand.id}/serenity/markets",
        {"market": "FR", "languageCode": "fr", "brandDomain": brand.domain, "brandNames": [brand.name]},
    )

    assert response.status_code == 201, response.content
    brand.refresh_from_db()
    assert brand.semrush_workspace_id and response.json()["workspaceId"] == brand.semrush_workspace_id


def test_the_serenity_routes_of_an_organization_without_serenity_answer_404_with_x_error(world):
    type(world.org).objects.filter(id=world.org.id).update(is_serenity_active=False)

    for tail, body in (("markets", {**world.brand_fields, "market": "FR", "languageCode": "fr"}), ("activate", {})):
        response = world.post(world.url(tail), body)
        assert problem(response, 404, "notFound")["message"] == "Serenity is not active for this brand"
        assert response["x-error"] == "Serenity is not active for this brand"
    assert Market.objects.count() == 0


def test_a_caller_outside_the_organization_gets_403_with_x_error_and_a_missing_one_404(world, bearer):
    stranger = bearer(user_id="stranger", org_ids=["F00D@AdobeOrg"])
    world.client.credentials(HTTP_AUTHORIZATION=f"Bearer {stranger}")
    forbidden = world.post(world.url("markets"), {**world.brand_fields, "market": "FR", "languageCode": "fr"})
    missing = world.post("/v2/orgs/8c24224f-d559-478d-a546-9b3f04cc3f78/brands", {"name": "X"})

    assert problem(forbidden, 403, "forbidden")["message"] == "User does not have access to this organization"
    assert forbidden["x-error"] == "User does not have access to this organization"
    assert (
        missing["x-error"]
        == problem(missing, 404, "notFound")["message"]
        == ("Organization not found: 8c24224f-d559-478d-a546-9b3f04cc3f78")
    )


def test_malformed_path_ids_are_a_400_as_the_originals_router_says(world):
    response = world.post(f"/v2/orgs/{world.org.id}/brands/adobe-brand-name/serenity/markets", {})

    body = problem(response, 400, "invalidRequest")
    assert body["message"] == "Brand Id is invalid. Please provide a valid UUID."
    assert body["errors"] == [
        {"parameter": "brandId", "code": "invalid_uuid", "message": "Brand Id is invalid. Please provide a valid UUID."}
    ]


# --- createBrand ------------------------------------------------------------------------------------------------


def test_the_originals_create_brand_body_makes_an_active_brand_with_its_sub_workspace(world):
    response = world.post(
        brands_url(world),
        {
            "name": "Fjell",
            "urls": [{"value": "https://www.fjell.example/no"}, "fjell.example"],
            "semrushModelIds": ["gpt-5-mini"],
            "brandAliases": ["Fjell Gear", {"name": "Fjellet", "regions": ["no"]}],
            "competitors": ["https://rival.example"],
            "description": "Outdoor gear",
        },
    )

    assert response.status_code == 201, response.content
    brand = Brand.objects.get(name="Fjell")
    body = response.json()
    assert (brand.status, brand.domain, brand.aliases) == ("active", "www.fjell.example", ["Fjell Gear", "Fjellet"])
    assert brand.semrush_workspace_id in [w["id"] for w in semrush.workspaces(parent_id="serenity")]
    assert body == {
        "id": str(brand.id),
        "name": "Fjell",
        "baseSiteId": str(brand.base_site_id),
        "baseUrl": "https://www.fjell.example/no",
        "semrushSubWorkspaceId": brand.semrush_workspace_id,
        "pendingSemrushProvisioning": None,
        "status": "active",
        "urls": [{"value": "https://www.fjell.example/no"}, {"value": "fjell.example"}],
        "brandAliases": [{"name": "Fjell Gear", "regions": []}, {"name": "Fjellet", "regions": ["no"]}],
        "siteIds": [str(brand.base_site_id)],
        "serenityActive": True,
        "serenityActivatedAt": body["serenityActivatedAt"],
        "updatedAt": body["updatedAt"],
        "updatedBy": "user-1",
        "description": "Outdoor gear",
        "brandContext": None,
        "mentionSentimentGuidance": None,
        "vertical": None,
        "origin": "human",
        "region": [],
        "competitors": [{"name": "https://rival.example", "url": None, "aliases": [], "regions": []}],
        "socialAccounts": [],
        "earnedContent": [],
        "brandClaimsEnabled": False,
        "displayName": "Fjell",
        "domain": "www.fjell.example",
        "primaryUrl": "https://www.fjell.example/no",
        "aliases": ["Fjell Gear", "Fjellet"],
        "semrushWorkspaceId": brand.semrush_workspace_id,
        "semrushModelIds": ["gpt-5-mini"],
        "createdAt": body["createdAt"],
    }
    assert body["serenityActivatedAt"] is not None


def test_creating_a_brand_again_by_name_updates_it(world):
    first = world.post(brands_url(world), {"name": "Fjell", "urls": ["fjell.example"]})
    again = world.post(
        brands_url(world), {"name": "Fjell", "urls": ["https://fjell.example/de"], "brandAliases": ["Fjell DE"]}
    )

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json()["id"] == first.json()["id"]
    brand = Brand.objects.get(name="Fjell")
    assert (brand.urls, brand.aliases) == (["https://fjell.example/de"], ["Fjell DE"])


def test_an_active_brand_is_never_made_pending_again(world):
    world.post(brands_url(world), {"name": "Fjell", "urls": ["fjell.example"]})

    response = world.post(brands_url(world), {"name": "Fjell", "status": "pending"})

    assert problem(response, 409, "conflict")["code"] == "brand_status_demotion_not_allowed"
    assert Brand.objects.get(name="Fjell").status == "active"


def test_a_pending_brand_gets_nothing_in_semrush_until_it_is_activated(world):
    response = world.post(
        brands_url(world),
        {"name": "Draft", "status": "pending", "urls": [], "semrushMarket": {"market": "us", "languageCode": "en"}},
    )

    assert response.status_code == 201
    brand = Brand.objects.get(name="Draft")
    assert (brand.status, brand.semrush_workspace_id, brand.base_site_id) == ("pending", None, None)
    assert Market.objects.filter(brand=brand).count() == 0


def test_an_organization_without_serenity_creates_plain_brands_and_refuses_semrush_work(world):
    type(world.org).objects.filter(id=world.org.id).update(is_serenity_active=False)

    plain = world.post(brands_url(world), {"name": "Flat", "urls": ["flat.example"]})
    with_market = world.post(
        brands_url(world), {"name": "X", "urls": ["x.example"], "semrushMarket": {"market": "us", "languageCode": "en"}}
    )
    generating = world.post(brands_url(world), {"name": "Y", "generatePrompts": True})

    assert plain.status_code == 201 and plain.json()["semrushSubWorkspaceId"] is None
    for refused in (with_market, generating):
        assert problem(refused, 403, "forbidden")["message"] == "Serenity is not active for this organization"
    assert not Brand.objects.filter(name__in=["X", "Y"]).exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"name": "X", "urls": ["x.example"], "semrushMarket": {"market": "us"}},
            "semrushMarket requires market and languageCode",
        ),
        (
            {"name": "X", "urls": ["x.example"], "generatePrompts": True},
            "market and languageCode are required when generatePrompts is true",
        ),
        (
            {"name": "X", "urls": [], "semrushMarket": {"market": "us", "languageCode": "en"}},
            "A primary URL is required to provision a Semrush brand",
        ),
        (
            {
                "name": "X",
                "urls": ["x.example"],
                "semrushMarket": {"market": "us", "languageCode": "en"},
                "generatePrompts": True,
            },
            "semrushModelIds must list at least one AI model to track",
        ),
        ({"urls": ["x.example"]}, "Brand name is required"),
    ],
)
def test_create_brand_refuses_what_the_original_refuses(world, body, message):
    assert problem(world.post(brands_url(world), body), 400, "invalidRequest")["message"] == message
    assert not Brand.objects.filter(name="X").exists()


def test_a_brand_whose_workspace_semrush_cannot_make_is_not_left_behind(world):
    semrush_controls.fail_next(10, status=500, path="/v1/workspaces", method="POST")

    response = world.post(brands_url(world), {"name": "Fjell", "urls": ["fjell.example"]})

    assert problem(response, 502, "serenityUpstreamError")["title"] == "Upstream request failed"
    assert (
        not Brand.objects.filter(name="Fjell").exists()
        and not Site.objects.filter(base_url="https://fjell.example").exists()
    )


def test_a_domain_that_is_another_brands_primary_url_is_a_409(world):
    response = world.post(brands_url(world), {"name": "Copy", "urls": [f"https://{world.brand.domain}"]})

    assert problem(response, 409, "conflict")["message"] == "This site is already the primary URL for another brand"


def test_the_first_market_of_a_new_brand_is_made_with_it(world):
    response = world.post(
        brands_url(world),
        {"name": "Fjell", "urls": ["https://fjell.example"], "semrushMarket": {"market": "no", "languageCode": "NO"}},
    )

    assert response.status_code == 201, response.content
    market = Market.objects.get(brand__name="Fjell")
    assert (market.country, market.language_code, market.domain) == ("NO", "no", "fjell.example")
    assert response.json()["market"]["id"] == str(market.id)


# --- activate ---------------------------------------------------------------------------------------------------


def test_the_wizards_approve_of_a_pending_brand_makes_it_active_with_its_workspace(world):
    pending = BrandFactory(organization=world.org, status="pending", semrush_workspace_id=None)

    response = world.post(f"/v2/orgs/{world.org.id}/brands/{pending.id}/serenity/activate", {})

    assert response.status_code == 200, response.content
    pending.refresh_from_db()
    assert pending.status == "active" and pending.semrush_workspace_id
    body = response.json()
    assert {k: body[k] for k in ("brandId", "status", "baseSiteId", "markets")} == {
        "brandId": str(pending.id),
        "status": "active",
        "baseSiteId": str(pending.base_site_id),
        "markets": [],
    }
    assert body["brand"]["semrushSubWorkspaceId"] == pending.semrush_workspace_id


def test_a_pending_brand_ignores_the_activation_body(world):
    pending = BrandFactory(organization=world.org, status="pending", semrush_workspace_id=None)

    response = world.post(
        f"/v2/orgs/{world.org.id}/brands/{pending.id}/serenity/activate",
        {"brandDomain": pending.domain, "brandNames": ["P"], "markets": [{"market": "FR", "languageCode": "fr"}]},
    )

    assert (response.status_code, response.json()["markets"]) == (200, [])
    assert Market.objects.filter(brand=pending).count() == 0


def test_a_pending_brand_without_a_base_site_is_not_activated(world):
    pending = BrandFactory(organization=world.org, status="pending", semrush_workspace_id=None, with_base_site=False)

    response = world.post(f"/v2/orgs/{world.org.id}/brands/{pending.id}/serenity/activate", {})

    assert problem(response, 400, "invalidRequest")["message"] == f"Brand has no onboarded primary site: {pending.id}"
    pending.refresh_from_db()
    assert (pending.status, pending.semrush_workspace_id) == ("pending", None)


@pytest.mark.parametrize("markets", ["absent", [], "not-an-array", {"market": "FR"}])
def test_a_brand_domain_without_markets_provisions_one_us_english_market(world, markets):
    body = {**world.brand_fields, **({} if markets == "absent" else {"markets": markets})}

    response = world.post(world.url("activate"), body)

    assert response.status_code == 200, response.content
    (entry,) = response.json()["markets"]
    assert (entry["market"], entry["languageCode"], entry["status"]) == ("US", "en", 201)
    assert Market.objects.get().country == "US"


def test_an_active_brand_without_a_domain_has_nothing_to_provision(world):
    nothing = world.post(world.url("activate"), {"markets": [{"market": "FR", "languageCode": "fr"}]})
    generating = world.post(world.url("activate"), {"generatePrompts": True})

    assert (nothing.status_code, nothing.json()["markets"], nothing.json()["status"]) == (200, [], "active")
    assert problem(generating, 400, "invalidRequest")["message"] == "A primary URL is required to generate prompts"
    assert Market.objects.count() == 0


def test_more_than_fifty_markets_are_refused_whole(world):
    response = world.post(
        world.url("activate"),
        {**world.brand_fields, "markets": [{"market": c, "languageCode": "en"} for c in COUNTRIES[:51]]},
    )

    assert problem(response, 400, "invalidRequest")["message"] == "markets must not exceed 50 entries"
    assert Market.objects.count() == 0


def test_a_market_already_live_counts_as_success(world):
    world.post(world.url("markets"), {**world.brand_fields, "market": "FR", "languageCode": "fr"})

    response = world.post(
        world.url("activate"),
        {
            **world.brand_fields,
            "markets": [{"market": "fr", "languageCode": "fr"}, {"market": "DE", "languageCode": "de"}],
        },
    )

    assert response.status_code == 200
    entries = response.json()["markets"]
    assert [(e["market"], e["languageCode"], e["status"]) for e in entries] == [("fr", "fr", 409), ("DE", "de", 201)]
    assert entries[0]["body"]["error"] == "sliceExists"
    assert entries[1]["body"]["id"] == str(Market.objects.get(country="DE").id)
    assert response.json()["baseSiteId"] == str(world.brand.base_site_id)


def test_a_market_that_breaks_a_rule_is_answered_in_its_entry_and_the_rest_go_ahead(world):
    response = world.post(
        world.url("activate"),
        {
            **world.brand_fields,
            "markets": [{"market": "ZZ", "languageCode": "en"}, "FR", {"market": "DE", "languageCode": "de"}],
        },
    )

    assert response.status_code == 207
    entries = response.json()["markets"]
    assert [(e["market"], e["status"], e["body"].get("error")) for e in entries] == [
        ("ZZ", 400, "unknownMarket"),
        (None, 400, "invalidRequest"),
        ("DE", 201, None),
    ]
    assert "baseSiteId" not in response.json()
    assert list(Market.objects.values_list("country", flat=True)) == ["DE"]


def test_a_semrush_failure_for_one_market_is_a_502_entry_and_leaves_no_market(world):
    semrush_controls.fail_next(10, status=500, path="/ai-projects", method="POST")
    response = world.post(
        world.url("activate"), {**world.brand_fields, "markets": [{"market": "FR", "languageCode": "fr"}]}
    )
    assert response.status_code == 207
    (entry,) = response.json()["markets"]
    assert (entry["status"], entry["body"]["error"]) == (502, "serenityUpstreamError")
    assert Market.objects.count() == 0


def activation_queries(world, async_on_markets: int, dump=None) -> int:
    markets = [{"market": c, "languageCode": "en"} for c in COUNTRIES[:async_on_markets]]
    Market.objects.filter(brand=world.brand).delete()
    AsyncJob.objects.all().delete()
    PromiseGrant.objects.all().delete()
    with CaptureQueriesContext(connection) as queries:
        response = world.post(
            world.url("activate"),
            {**world.brand_fields, "markets": markets, "generatePrompts": True},
            **{"x-promise-audience": "semrush"},
        )
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


# --- The old synchronous path -------------------------------------------------------------------------------------


@pytest.mark.solo  # a 4 s deadline against 200 ms calls: a loaded machine would move where it falls
def test_the_old_path_shares_one_deadline_across_the_batch_and_reports_what_it_wrote(world, settings):
    settings.SYNC_WRITE_DEADLINE_SECONDS = 4.0
    settings.MARKET_PROVISION_CONCURRENCY = 1  # one after another: the later markets meet the spent deadline
    semrush_controls.set_latency(200)  # each Semrush call takes 200 ms: the first market fits, not all six
    slices = [{"market": c, "languageCode": "en"} for c in ["US", "GB", "IE", "AU", "CA", "NZ"]]
    response = world.post(world.url("activate"), {**world.brand_fields, "markets": slices})
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


def test_old_path_prompts_are_tagged_branded_by_the_markets_brand_names_and_the_aliases(world):
    semrush_controls.set_catalogue(
        domain=world.brand.domain,
        country="FR",
        items=[
            {
                "topic": "chaussures",
                "volume": 100,
                "examplePrompts": [
                    "Nordlicht chaussures avis",
                    "acheter chaussures",
                    "  ",
                    "chaussures Nordlicht Gear",
                ],
            },
            {"topic": "sacs", "volume": "n/a", "examplePrompts": ["meilleur sac à dos Fjellet"]},
        ],
    )
    response = world.post(
        world.url("markets"), {**world.brand_fields, "brandNames": ["Fjellet"], "market": "FR", "languageCode": "fr"}
    )
    assert response.status_code == 201
    assert (response.json()["topicCount"], response.json()["prompts"]) == (2, {"status": "written", "written": 4})
    tags = semrush.tag_values(world.brand.semrush_workspace_id)
    by_id = {tag_id: (root, value) for root, values in tags.items() for value, tag_id in values.items()}
    written = {
        p["text"]: sorted(by_id[t] for t in p["tagIds"])
        for p in semrush.prompts(Market.objects.get().semrush_project_id)
    }
    assert written == {
        "Nordlicht chaussures avis": [("intent", "commercial"), ("source", "semrush"), ("type", "branded")],
        "acheter chaussures": [("intent", "transactional"), ("source", "semrush"), ("type", "non-branded")],
        "chaussures Nordlicht Gear": [("intent", "informational"), ("source", "semrush"), ("type", "branded")],
        "meilleur sac à dos Fjellet": [("intent", "commercial"), ("source", "semrush"), ("type", "branded")],
    }


def test_geo_target_ids_come_from_the_country_code_library(world):
    response = world.post(world.url("markets"), {**world.brand_fields, "market": "US", "languageCode": "en"})
    assert response.json()["geoTargetId"] == 2840 == geo.geo_target_id("US")
