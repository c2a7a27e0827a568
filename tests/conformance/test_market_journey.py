"""The original's own cases for the UI's market journey around onboarding (adobe/spacecat-api-service), replayed over
HTTP against the running service for both kinds of caller: listMarkets, getMarket, deleteMarket and the
organization's catalogues, from `test/controllers/serenity.test.js` and the handlers' tests
`test/support/serenity/handlers/markets-subworkspace.test.js` (every brand here is in sub-workspace mode: its own
Semrush workspace) and `test/support/serenity/handlers/markets.test.js` (the slice checks, the language catalogue).

The original drives its controller with its handlers stubbed; here the same request goes through the service and
its simulators. Not replayed: a path segment left empty (`/markets//en`, which no router here or there routes to a
controller), the data-access failures the original stubs (Organization data-access unavailable, a half-delete whose
database write fails), and the `ctx.params` defaults of its controller.
"""

from markets.models import Market
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.conformance.conftest import OTHER_IMS_ID, problem
from tests.markets.factories import OrganizationFactory, SiteFactory

BRAND_NAMES = ["Nordlicht"]


def create(world, market="us", language="en", **fields) -> Market:
    body = {"market": market, "languageCode": language, "brandDomain": world.brand.domain, "brandNames": BRAND_NAMES}
    response = world.api.post(world.path("markets"), {**body, **fields})
    assert response.status_code == 201, response.text
    return Market.objects.get(id=response.json()["id"])


# --- test/controllers/serenity.test.js: routing to handlers ---------------------------------------------------------


def test_delete_market_forwards_the_path_slice_params(world):
    """serenity.test.js: 'deleteMarket forwards the path slice params to handleDeleteMarket' (2840, EN -> 2840, en)"""
    market = create(world)

    response = world.api.delete(world.path("markets/2840/EN"))

    assert response.status_code == 204, response.text
    assert not Market.objects.filter(id=market.id).exists()


def test_delete_market_refuses_a_non_digit_geo_target_id(world):
    """serenity.test.js: 'deleteMarket null-routes a non-digit geoTargetId (e.g. "2840abc") to the handler' (400)"""
    market = create(world)

    problem(world.api.delete(world.path("markets/2840abc/en")), 400, "invalidRequest")

    assert Market.objects.filter(id=market.id).exists()  # never read as the (2840, en) slice


def test_delete_market_refuses_geo_target_id_zero(world):
    """serenity.test.js: 'deleteMarket forwards 0 through to the handler (handler rejects via positive-integer
    guard)'"""
    body = problem(world.api.delete(world.path("markets/0/en")), 400, "invalidRequest")

    assert body["message"] == "geoTargetId must be a positive integer"


def test_list_markets_answers_the_brands_markets(world):
    """serenity.test.js: 'listMarkets returns the handler result wrapped in ok()'"""
    create(world)

    response = world.api.get(world.path("markets"))

    assert response.status_code == 200, response.text
    assert response.json()["items"][0]["brandId"] == str(world.brand.id)


def test_get_market_forwards_the_path_slice_params_and_answers_the_slice(world):
    """serenity.test.js: 'getMarket forwards the path slice params to handleGetMarket and wraps the result in ok()'"""
    market = create(world)

    response = world.api.get(world.path("markets/2840/EN"))

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["geoTargetId"], body["languageCode"]) == (2840, "en")
    assert body["semrushProjectId"] == market.semrush_project_id


def test_get_market_refuses_a_non_digit_geo_target_id(world):
    """serenity.test.js: 'getMarket null-routes a non-digit geoTargetId (e.g. "2840abc") to the handler'"""
    create(world)

    problem(world.api.get(world.path("markets/2840abc/en")), 400, "invalidRequest")


def test_get_market_answers_market_not_found_for_a_slice_without_a_market(world):
    """serenity.test.js: 'getMarket maps a handler 404 marketNotFound to a 404 envelope carrying that token'"""
    body = problem(world.api.get(world.path("markets/2840/en")), 404, "marketNotFound")

    assert body["message"] == "No market for this brand and (geoTargetId, languageCode) slice"


def test_get_market_without_a_bearer_is_401(world):
    """serenity.test.js: 'getMarket 401s (IMS-only) before dispatching when the caller is not IMS-authenticated'.
    Without a bearer: 401 here too. A session token without x-promise-token reads it here, where the original
    answers 401 (docs/api.md, "Differences from the original": a read reaches no Semrush)."""
    create(world)

    problem(world.api.http.get(world.path("markets/2840/en")), 401, "authenticationRequired")
    assert world.api.get(world.path("markets/2840/en")).status_code == 200


def test_get_market_of_an_organization_the_caller_may_not_access_is_403(world):
    """serenity.test.js: 'getMarket returns the authorize() error (403) and does not dispatch when the caller lacks
    org access'"""
    outsider = world.other_caller(user_id="outsider", org_ids=(OTHER_IMS_ID,))

    problem(world.api.get(world.path("markets/2840/en"), caller=outsider), 403, "forbidden")


def test_an_upstream_failure_answers_502_without_leaking_provider_detail(world):
    """serenity.test.js: 'upstream SerenityTransportError maps to 502 envelope without leaking provider detail',
    replayed on deleteMarket (listMarkets calls nothing upstream here: it reads this service's records)."""
    market = create(world)
    semrush_controls.fail_next(4, status=503, path="/ai-projects/", method="DELETE")

    body = problem(world.api.delete(world.path("markets/2840/en")), 502, "serenityUpstreamError")

    assert "sandbox" not in body["message"] and market.semrush_project_id not in body["message"]
    assert Market.objects.filter(id=market.id).exists()


def test_list_org_models_answers_the_global_catalogue(world):
    """serenity.test.js: 'listOrgModels returns the global catalog (org-level, no brand)'"""
    response = world.api.get(world.org_path("models"), promise=True)

    assert response.status_code == 200, response.text
    assert {"id", "key"} <= set(response.json()["items"][0])


def test_list_org_languages_answers_the_language_catalogue(world):
    """serenity.test.js: 'listOrgLanguages returns the language catalog (org-level, no brand)'"""
    response = world.api.get(world.org_path("languages"), promise=True)

    assert response.status_code == 200, response.text
    assert "name" in response.json()["items"][0]


def test_the_org_catalogues_refuse_an_org_id_that_is_not_a_uuid(world):
    """serenity.test.js: 'listOrgModels 400s when spaceCatId is not a UUID', 'listOrgLanguages 400s when spaceCatId is
    not a UUID'"""
    for tail in ("models", "languages"):
        problem(world.api.get(world.org_path(tail, org="not-a-uuid"), promise=True), 400, "invalidRequest")


def test_the_org_catalogues_refuse_a_caller_without_access_to_the_org(world):
    """serenity.test.js: 'listOrgModels 403s when the user has no access to the org', 'listOrgLanguages 403s when the
    user has no access to the org'"""
    other = OrganizationFactory(ims_org_id=OTHER_IMS_ID)
    for tail in ("models", "languages"):
        problem(world.api.get(world.org_path(tail, org=other.id), promise=True), 403, "forbidden")


def test_the_org_catalogues_of_an_organization_that_does_not_exist_are_404(world):
    """serenity.test.js: 'listOrgModels 404s when the organization is not found', 'listOrgLanguages 404s when the
    organization is not found'"""
    for tail in ("models", "languages"):
        problem(
            world.api.get(world.org_path(tail, org="00000000-0000-4000-8000-000000000000"), promise=True),
            404,
            "notFound",
        )


def test_the_org_catalogues_route_an_upstream_failure_through_the_error_mapping(world):
    """serenity.test.js: 'listOrgModels routes an upstream failure through mapError', 'listOrgLanguages routes an
    upstream failure through mapError'"""
    from markets.clients import semrush as client

    client._languages.clear()
    for path in ("/v1/ai_models", "/v1/languages"):
        semrush_controls.fail_next(4, status=502, path=path)
    for tail in ("models", "languages"):
        problem(world.api.get(world.org_path(tail), promise=True), 502, "serenityUpstreamError")


# --- test/support/serenity/handlers/markets-subworkspace.test.js ----------------------------------------------------


def test_list_maps_the_markets_to_slice_dtos(world):
    """markets-subworkspace.test.js: 'maps the live listing to slice DTOs'"""
    create(world)

    (item,) = world.api.get(world.path("markets")).json()["items"]

    assert {k: item[k] for k in ("brandId", "geoTargetId", "languageCode", "status")} == {
        "brandId": str(world.brand.id),
        "geoTargetId": 2840,
        "languageCode": "en",
        "status": "live",
    }


def test_list_of_a_brand_without_markets_is_empty(world):
    """markets-subworkspace.test.js: 'returns an empty list for an empty workspace'; markets.test.js: 'returns empty
    when no rows'"""
    assert world.api.get(world.path("markets")).json() == {"items": []}


def test_list_omits_the_counts_it_does_not_have(world):
    """markets-subworkspace.test.js: 'passes promptsCount/modelsCount through when carried, omits them otherwise'.
    This service keeps no count of a project's prompts or models: both are omitted, as the original omits them when
    Semrush reports none (docs/api.md, "Differences from the original")."""
    create(world)

    (item,) = world.api.get(world.path("markets")).json()["items"]

    assert "promptsCount" not in item and "modelsCount" not in item


def test_list_names_each_markets_site(world):
    """markets-subworkspace.test.js: 'enriches each slice with its siteId from the brand mapping rows (LLMO-6405)',
    'leaves siteId null when no dataAccess is supplied (best-effort)'"""
    site = SiteFactory(organization=world.org, brand=world.brand, base_url=f"https://{world.brand.domain}/de")
    create(world, "de", "de", siteId=str(site.id), brandDomain=None)
    Market.objects.create(
        brand=world.brand, country="FR", language_code="fr", geo_target_id=2250, semrush_project_id="prj-no-site"
    )

    by_slice = {
        f"{m['geoTargetId']}#{m['languageCode']}": m["siteId"]
        for m in world.api.get(world.path("markets")).json()["items"]
    }

    assert by_slice == {"2276#de": str(site.id), "2250#fr": None}


def test_get_answers_the_resolved_slice(world):
    """markets-subworkspace.test.js: 'returns the resolved slice + initialized'. This service has no AIO readiness
    probe: `initialized` is absent, as in the original's flat mode (docs/api.md, "Differences from the original")."""
    market = create(world)

    body = world.api.get(world.path("markets/2840/en")).json()

    assert (body["geoTargetId"], body["languageCode"], body["semrushProjectId"]) == (
        2840,
        "en",
        market.semrush_project_id,
    )
    assert "initialized" not in body


def test_get_of_a_slice_without_a_market_is_404_market_not_found(world):
    """markets-subworkspace.test.js: '404s marketNotFound when no slice matches'"""
    create(world, "de", "de")

    problem(world.api.get(world.path("markets/2840/en")), 404, "marketNotFound")


def test_get_refuses_an_invalid_slice(world):
    """markets-subworkspace.test.js: '400s on an invalid slice' (-1), '400s on an invalid languageCode (valid geo)'
    (zz9); markets.test.js: '400s on invalid geoTargetId (non-positive)', '400s on syntactically malformed
    languageCode (`1z`)'"""
    for tail, part in (
        ("-1/en", "geoTargetId"),
        ("0/en", "geoTargetId"),
        ("2840/zz9", "languageCode"),
        ("2840/1z", "languageCode"),
    ):
        body = problem(world.api.get(world.path(f"markets/{tail}")), 400, "invalidRequest")
        assert part in body["message"]


def test_delete_deletes_the_resolved_project(world):
    """markets-subworkspace.test.js: 'deletes the resolved project and returns 204'"""
    market = create(world)

    response = world.api.delete(world.path("markets/2840/en"))

    assert response.status_code == 204
    (deleted,) = semrush.calls(method="DELETE")
    assert deleted["path"].endswith(
        f"/workspaces/{world.brand.semrush_workspace_id}/ai-projects/{market.semrush_project_id}"
    )


def test_delete_of_a_slice_without_a_market_is_204(world):
    """markets-subworkspace.test.js: 'is idempotent (204) when no slice matches'; markets.test.js: 'returns 204
    (idempotent) when no row exists for the slice'"""
    assert world.api.delete(world.path("markets/2840/en")).status_code == 204
    assert semrush.calls(method="DELETE") == []


def test_delete_treats_an_upstream_404_as_success(world):
    """markets-subworkspace.test.js: 'treats an upstream 404 as success'"""
    market = create(world)
    semrush_controls.fail_next(1, status=404, path="/ai-projects/", method="DELETE")

    assert world.api.delete(world.path("markets/2840/en")).status_code == 204
    assert not Market.objects.filter(id=market.id).exists()


def test_delete_propagates_a_non_404_failure_and_keeps_the_market(world):
    """markets-subworkspace.test.js: 'propagates a non-404 delete failure'; markets.test.js: 'propagates non-404
    upstream failures and does NOT remove the row'"""
    market = create(world)
    semrush_controls.fail_next(4, status=500, path="/ai-projects/", method="DELETE")

    problem(world.api.delete(world.path("markets/2840/en")), 502, "serenityUpstreamError")
    assert Market.objects.filter(id=market.id).exists()


def test_delete_refuses_an_invalid_slice(world):
    """markets.test.js: '400s on invalid geoTargetId', '400s on invalid languageCode (regex-rejected, not just
    uppercase)'"""
    create(world)

    problem(world.api.delete(world.path("markets/0/en")), 400, "invalidRequest")
    problem(world.api.delete(world.path("markets/2840/1z")), 400, "invalidRequest")
    assert world.api.delete(world.path("markets/2840/EN")).status_code == 204  # upper case is accepted


# --- test/support/serenity/handlers/markets.test.js: listLanguageCatalog -------------------------------------------


def test_the_language_catalogue_is_name_sorted(world):
    """markets.test.js: 'returns the Semrush language catalog, name-sorted, dropping nameless rows'"""
    names = [item["name"] for item in world.api.get(world.org_path("languages"), promise=True).json()["items"]]

    assert names == sorted(names, key=str.casefold) and all(names)


def test_the_language_catalogue_tolerates_a_404_or_405(world):
    """markets.test.js: 'tolerates a 404/405 catalog by returning an empty list'"""
    from markets.clients import semrush as client

    for status in (404, 405):
        client._languages.clear()
        semrush_controls.fail_next(1, status=status, path="/v1/languages")
        assert world.api.get(world.org_path("languages"), promise=True).json() == {"items": []}


def test_the_language_catalogue_propagates_another_error(world):
    """markets.test.js: 'propagates a non-404/405 catalog error'"""
    from markets.clients import semrush as client

    client._languages.clear()
    semrush_controls.fail_next(4, status=500, path="/v1/languages")

    problem(world.api.get(world.org_path("languages"), promise=True), 502, "serenityUpstreamError")
