"""The serenity cases of the original's `test/controllers/brands.test.js` (adobe/spacecat-api-service,
`createBrandForOrg`), replayed over HTTP against the running service: createBrand in an organization with and
without Serenity, its validation, and its Semrush failures."""

import pytest

from markets.models import Brand, Market
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.conformance.conftest import OTHER_IMS_ID, problem
from tests.markets.factories import SiteFactory

SEMRUSH_DATA = {
    "name": "New Brand",
    "urls": [{"value": "https://acme.com/path"}],
    "semrushMarket": {"market": "us", "languageCode": "en"},
    "semrushModelIds": ["model-a", "model-b"],
}


def workspace_count() -> int:
    return len(semrush.workspaces(parent_id="serenity"))


def serenity_off(world):
    type(world.org).objects.filter(id=world.org.id).update(is_serenity_active=False)


def test_returns_201_when_brand_is_created(world):
    """brands.test.js: 'returns 201 when brand is created'"""
    site = SiteFactory(organization=world.org, base_url="https://new-brand.example")

    response = world.api.post(world.brands_path, {"name": "New Brand", "baseSiteId": str(site.id)})

    assert response.status_code == 201, response.text
    assert (response.json()["name"], response.json()["baseSiteId"]) == ("New Brand", str(site.id))


def test_returns_409_when_a_by_name_create_would_demote_an_active_brand_to_pending(world):
    """brands.test.js: 'returns 409 when a by-name create would demote an active brand to pending (LLMO-5587)'"""
    response = world.api.post(world.brands_path, {"name": world.brand.name, "status": "pending"}, promise=False)

    problem(response, 409, "conflict")
    world.brand.refresh_from_db()
    assert world.brand.status == "active"


def test_returns_400_when_brand_data_is_missing(world):
    """brands.test.js: 'returns 400 when brand data is missing'"""
    response = world.api.http.post(
        world.brands_path,
        content=b"null",
        headers={**world.caller.headers(promise=False), "content-type": "application/json"},
    )

    problem(response, 400, "invalidRequest")


# --- serenity-first provisioning (semrushMarket present) -------------------------------------------------------------


def test_provisions_the_sub_workspace_then_creates_the_brand_bound_to_it(world):
    """brands.test.js: 'provisions the sub-workspace then creates the brand bound to it (201)'"""
    response = world.api.post(world.brands_path, SEMRUSH_DATA)

    assert response.status_code == 201, response.text
    body = response.json()
    brand = Brand.objects.get(id=body["id"])
    assert body["semrushSubWorkspaceId"] == brand.semrush_workspace_id
    assert brand.semrush_workspace_id in [w["id"] for w in semrush.workspaces(parent_id="serenity")]
    assert (body["market"]["geoTargetId"], body["market"]["languageCode"]) == (2840, "en")
    assert (brand.domain, brand.semrush_model_ids) == ("acme.com", ["model-a", "model-b"])
    assert Market.objects.get(brand=brand).domain == "acme.com"


def test_rejects_a_semrush_mode_create_with_403_when_serenity_is_inactive_for_the_org(world):
    """brands.test.js: 'rejects a Semrush-mode create with 403 when serenity is inactive for the org (no
    provisioning, no row write)'"""
    serenity_off(world)
    workspaces = workspace_count()

    response = world.api.post(world.brands_path, SEMRUSH_DATA)

    problem(response, 403, "forbidden")
    assert not Brand.objects.filter(name="New Brand").exists() and workspace_count() == workspaces


def test_mirrors_the_url_the_market_tracks_as_a_site(world):
    """brands.test.js: 'mirrors the url the market TRACKS as a Site (+ brand_sites link) after the row is
    written'"""
    response = world.api.post(world.brands_path, SEMRUSH_DATA)

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["baseUrl"] == "https://acme.com/path"
    assert body["baseSiteId"] in body["siteIds"]


def test_does_not_mirror_a_site_for_a_pending_draft_brand(world):
    """brands.test.js: 'does NOT mirror a Site for a pending (draft) brand — nothing is provisioned yet'. Nothing
    is made in Semrush. The brand's base site is made from its first URL at once (the original makes it only from
    `baseSiteId`: docs/api.md, "Differences from the original", the row on a pending brand's base site)."""
    workspaces = workspace_count()

    response = world.api.post(world.brands_path, {**SEMRUSH_DATA, "status": "pending"}, promise=False)

    assert response.status_code == 201, response.text
    assert (response.json()["semrushSubWorkspaceId"], response.json()["status"]) == (None, "pending")
    assert "market" not in response.json() and Market.objects.count() == 0
    assert workspace_count() == workspaces and semrush.calls(path_contains="/ai-projects") == []


def test_redacts_the_gateway_url_from_a_semrush_upstream_error_on_provisioning(world):
    """brands.test.js: 'redacts the gateway URL from a Semrush upstream error on provisioning'. The original's
    message is "Upstream request failed"; ours says what could not be made (docs/api.md, "Differences from the
    original", the row on a 502's message)."""
    semrush_controls.fail_next(10, status=502, path="/v1/workspaces", method="POST")

    response = world.api.post(world.brands_path, SEMRUSH_DATA)

    body = problem(response, 502, "serenityUpstreamError")
    assert (body["title"], body["message"]) == (
        "Upstream request failed",
        "The brand's Semrush workspace could not be created.",
    )
    for internal in ("/v1/workspaces", "sandbox", "127.0.0.1"):
        assert internal not in response.text and internal not in response.headers.get("x-error", "")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_maps_a_401_semrush_upstream_error_on_provisioning_to_http_401(world):
    """brands.test.js: 'maps a 401 Semrush upstream error on provisioning to HTTP 401 + generic auth message'"""
    semrush_controls.fail_next(1, status=401, path="/v1/workspaces", method="POST")

    response = world.api.post(world.brands_path, SEMRUSH_DATA)

    body = problem(response, 401, "authenticationRequired")
    assert body["message"] == "Upstream authorization failed"
    for internal in ("/v1/workspaces", "sandbox", "injected"):
        assert internal not in response.text and internal not in response.headers.get("x-error", "")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_returns_400_when_semrush_market_lacks_a_language_code(world):
    """brands.test.js: 'returns 400 when semrushMarket lacks a languageCode'"""
    response = world.api.post(
        world.brands_path,
        {"name": "New Brand", "urls": [{"value": "https://acme.com"}], "semrushMarket": {"market": "us"}},
    )

    problem(response, 400, "invalidRequest")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_returns_400_when_semrush_model_ids_is_missing_and_generate_prompts_is_true(world):
    """brands.test.js: 'returns 400 when semrushModelIds is missing or empty and generatePrompts is true'"""
    response = world.api.post(
        world.brands_path,
        {
            "name": "New Brand",
            "urls": [{"value": "https://acme.com"}],
            "semrushMarket": {"market": "us", "languageCode": "en"},
            "generatePrompts": True,
        },
    )

    problem(response, 400, "invalidRequest")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_returns_400_when_generate_prompts_is_true_but_no_market_was_supplied(world):
    """brands.test.js: 'returns 400 when generatePrompts is true but no market/language was supplied'"""
    response = world.api.post(
        world.brands_path, {"name": "New Brand", "urls": [{"value": "https://acme.com"}], "generatePrompts": True}
    )

    problem(response, 400, "invalidRequest")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_provisions_without_models_when_generate_prompts_is_false(world):
    """brands.test.js: 'provisions WITHOUT models when generatePrompts is false (model-less project allowed)'"""
    response = world.api.post(
        world.brands_path,
        {
            "name": "New Brand",
            "urls": [{"value": "https://acme.com"}],
            "semrushMarket": {"market": "us", "languageCode": "en"},
            "generatePrompts": False,
        },
    )

    assert response.status_code == 201, response.text
    assert response.json()["semrushModelIds"] == []
    assert "promptGeneration" not in response.json() and response.json()["market"]["projectId"]


def test_returns_400_when_no_primary_url_is_present_to_derive_a_domain(world):
    """brands.test.js: 'returns 400 when no primary URL is present to derive a domain'"""
    response = world.api.post(
        world.brands_path, {"name": "New Brand", "urls": [], "semrushMarket": {"market": "us", "languageCode": "en"}}
    )

    problem(response, 400, "invalidRequest")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_creates_a_bare_sub_workspace_when_no_market_is_supplied(world):
    """brands.test.js: 'creates a bare sub-workspace (no project) when no market is supplied (serenity-active)'"""
    site = SiteFactory(organization=world.org, base_url="https://new-brand.example")

    response = world.api.post(world.brands_path, {"name": "New Brand", "baseSiteId": str(site.id)})

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["semrushSubWorkspaceId"] and body["baseSiteId"] == str(site.id)
    assert "market" not in body and semrush.projects(body["semrushSubWorkspaceId"]) == []


def test_does_a_flat_create_when_the_org_is_not_serenity_active(world):
    """brands.test.js: 'does a flat create (no Semrush provisioning) when the org is not serenity-active'"""
    serenity_off(world)
    site = SiteFactory(organization=world.org, base_url="https://flat-brand.example")
    workspaces = workspace_count()

    response = world.api.post(world.brands_path, {"name": "Flat Brand", "baseSiteId": str(site.id)}, promise=False)

    assert response.status_code == 201, response.text
    assert response.json()["semrushSubWorkspaceId"] is None and workspace_count() == workspaces


def test_saves_a_pending_draft_defers_provisioning_writes_no_stash_no_anchor(world):
    """brands.test.js: 'saves a pending draft: defers provisioning, writes no stash, no anchor (201)'"""
    response = world.api.post(
        world.brands_path,
        {"name": "New Brand", "status": "pending", "urls": [], "semrushMarket": {"market": "us", "languageCode": "en"}},
        promise=False,
    )

    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["pendingSemrushProvisioning"], body["semrushSubWorkspaceId"], body["status"]) == (
        None,
        None,
        "pending",
    )


def test_still_requires_market_and_language_code_even_for_a_pending_draft(world):
    """brands.test.js: 'still requires market and languageCode even for a pending draft'"""
    response = world.api.post(
        world.brands_path, {"name": "New Brand", "status": "pending", "semrushMarket": {"market": "us"}}, promise=False
    )

    problem(response, 400, "invalidRequest")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_returns_400_when_brand_name_is_missing(world):
    """brands.test.js: 'returns 400 when brand name is missing'"""
    response = world.api.post(world.brands_path, {"description": "No name"})

    problem(response, 400, "invalidRequest")


def test_returns_404_when_organization_is_not_found(world):
    """brands.test.js: 'returns 404 when organization is not found'"""
    response = world.api.post("/v2/orgs/8c24224f-d559-478d-a546-9b3f04cc3f78/brands", {"name": "New Brand"})

    problem(response, 404, "notFound")


def test_returns_400_when_space_cat_id_is_not_a_valid_uuid(world):
    """brands.test.js: 'returns 400 when spaceCatId is not a valid UUID'"""
    response = world.api.post("/v2/orgs/not-a-uuid/brands", {"name": "New Brand"})

    problem(response, 400, "invalidRequest")


def test_returns_403_when_user_lacks_access(world):
    """brands.test.js: 'returns 403 when user lacks access'"""
    stranger = world.other_caller(user_id="stranger", org_ids=(OTHER_IMS_ID,))

    response = world.api.post(world.brands_path, {"name": "New Brand"}, caller=stranger)

    problem(response, 403, "forbidden")
    assert not Brand.objects.filter(name="New Brand").exists()


def test_returns_400_when_brand_guidance_fields_have_the_wrong_type(world):
    """brands.test.js: 'returns 400 when brand guidance fields have the wrong type'"""
    response = world.api.post(world.brands_path, {"name": "New Brand", "brandContext": {"text": "wrong"}})

    assert problem(response, 400, "invalidRequest")["message"] == "brandContext must be a string or null"
    assert not Brand.objects.filter(name="New Brand").exists()


def test_returns_400_when_brand_guidance_fields_are_longer_than_4000_characters(world):
    """brands.test.js: 'returns 400 when brand guidance fields are longer than 4000 characters'"""
    response = world.api.post(world.brands_path, {"name": "New Brand", "mentionSentimentGuidance": "x" * 4001})

    assert problem(response, 400, "invalidRequest")["message"] == (
        "mentionSentimentGuidance must be at most 4000 characters"
    )
    assert not Brand.objects.filter(name="New Brand").exists()


def test_accepts_brand_guidance_that_trims_to_within_the_limit(world):
    """brands.test.js: 'accepts brand guidance that trims to within the limit despite surrounding whitespace'"""
    site = SiteFactory(organization=world.org, base_url="https://new-brand.example")

    response = world.api.post(
        world.brands_path, {"name": "New Brand", "baseSiteId": str(site.id), "brandContext": f"  {'x' * 4000}  "}
    )

    assert response.status_code == 201, response.text


# --- competitor self-reference guard + Semrush-mode gating (create) -----------------------------------------------


def test_enters_bare_semrush_mode_for_a_serenity_active_create_with_generate_prompts_false(world):
    """brands.test.js: 'enters bare Semrush mode for a serenity-active create with generatePrompts:false and no
    market'"""
    site = SiteFactory(organization=world.org, base_url="https://bare.com")

    response = world.api.post(
        world.brands_path,
        {
            "name": "Bare Brand",
            "urls": [{"value": "https://bare.com"}],
            "baseSiteId": str(site.id),
            "generatePrompts": False,
        },
    )

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["semrushSubWorkspaceId"] and body["pendingSemrushProvisioning"] is None
    assert semrush.projects(body["semrushSubWorkspaceId"]) == []


def test_flat_creates_a_non_serenity_org_sending_a_bare_generate_prompts_false(world):
    """brands.test.js: 'flat-creates (no 403) a non-serenity org sending a bare generatePrompts:false'"""
    serenity_off(world)

    response = world.api.post(
        world.brands_path,
        {"name": "Flat Brand", "urls": [{"value": "https://flat.com"}], "generatePrompts": False},
        promise=False,
    )

    assert response.status_code == 201, response.text
    assert (response.json()["semrushSubWorkspaceId"], response.json()["pendingSemrushProvisioning"]) == (None, None)


@pytest.mark.parametrize(
    "body",
    [{"name": "X", "semrushMarket": {"market": "us", "languageCode": "en"}}, {"name": "X", "generatePrompts": True}],
    ids=["semrushMarket", "generatePrompts"],
)
def test_403s_a_non_serenity_org_that_asks_for_semrush_work(world, body):
    """brands.test.js: '403s a non-serenity org that supplies a semrushMarket' and '403s a non-serenity org that
    requests generatePrompts:true (no market)'"""
    serenity_off(world)

    response = world.api.post(world.brands_path, body)

    problem(response, 403, "forbidden")
    assert not Brand.objects.filter(name="X").exists()


def test_does_not_stash_for_a_pending_serenity_active_create(world):
    """brands.test.js: 'does not stash for a PENDING serenity-active create (generatePrompts:false, no market)'"""
    workspaces = workspace_count()

    response = world.api.post(
        world.brands_path, {"name": "Draft", "status": "pending", "generatePrompts": False}, promise=False
    )

    assert response.status_code == 201, response.text
    assert (response.json()["status"], response.json()["pendingSemrushProvisioning"]) == ("pending", None)
    assert workspace_count() == workspaces


def test_brand_aliases_normalize_objects_and_strings_to_name_and_regions_and_filter_blanks(world):
    """brands.test.js: 'brandAliases: normalizes objects + strings to { name, regions } and filters blanks'. The
    aliases are answered as the original's V2Brand returns them (its `brand_aliases` rows), and the brand is a
    user's: `origin` is `human`."""
    body = {
        **SEMRUSH_DATA,
        "brandAliases": [{"name": "Brand Alias Co", "regions": ["us"]}, "plain string alias", {"noName": True}],
    }

    response = world.api.post(world.brands_path, body)

    assert response.status_code == 201, response.text
    assert response.json()["brandAliases"] == [
        {"name": "Brand Alias Co", "regions": ["us"]},
        {"name": "plain string alias", "regions": []},
    ]
    assert response.json()["origin"] == "human"
    assert Brand.objects.get(id=response.json()["id"]).aliases == ["Brand Alias Co", "plain string alias"]
