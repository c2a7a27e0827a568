"""The original's `test/controllers/serenity.test.js` (adobe/spacecat-api-service), replayed over HTTP against the
running service: createMarket and activate, who may call them, and how their errors read.

The original drives its controller with its handlers stubbed; here the same request goes through the whole
service and the simulators, and each test asserts the status and the fields the original asserts. Where the
original's case is about a route this service does not have (listPrompts), it is replayed on createMarket.
"""

from markets.models import Brand, Market
from sandbox.ims import ledger
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.conformance.conftest import OTHER_IMS_ID, problem
from tests.markets.factories import BrandFactory, OrganizationFactory, SiteFactory

MINIMUM_BODY = {"market": "us", "languageCode": "en", "brandDomain": "x.com", "brandNames": ["X"]}
TWO_MARKETS = {
    "brandDomain": "x.com",
    "brandNames": ["X"],
    "markets": [{"market": "us", "languageCode": "en"}, {"market": "de", "languageCode": "de"}],
}


# --- auth + brand resolution --------------------------------------------------------------------------------------


def test_401s_without_an_authorization_header(world):
    """serenity.test.js: '401s without an Authorization header'"""
    headers = {k: v for k, v in world.caller.headers(promise=True).items() if k != "Authorization"}

    response = world.api.http.post(world.path("markets"), json=MINIMUM_BODY, headers=headers)

    problem(response, 401, "authenticationRequired")
    assert Market.objects.count() == 0


def test_exchanges_x_promise_token_and_forwards_it_upstream(world):
    """serenity.test.js: 'exchanges x-promise-token for an IMS token and forwards it upstream, bypassing the
    IMS-type gate' (either bearer: the forwarded token is what acts in Semrush)."""
    exchanged_before = ledger.count(ledger.EXCHANGED)
    headers = {"x-promise-token": world.caller.promise_token(), "x-promise-audience": "semrush"}

    response = world.api.post(world.path("markets"), MINIMUM_BODY, promise=False, headers=headers)

    assert response.status_code == 201, response.text
    assert ledger.count(ledger.EXCHANGED) == exchanged_before + 1
    assert semrush.project(response.json()["projectId"]) is not None


def test_decodes_a_uri_encoded_x_promise_token_header_before_exchanging(world):
    """serenity.test.js: 'decodes a URI-encoded x-promise-token header before exchanging'"""
    world.caller.promise_token()
    token = world.caller.forwarded[-1]
    encoded = "".join(f"%{byte:02X}" for byte in token.encode())  # every character percent-encoded

    response = world.api.post(
        world.path("markets"),
        MINIMUM_BODY,
        promise=False,
        headers={"x-promise-token": encoded, "x-promise-audience": "semrush"},
    )

    assert response.status_code == 201, response.text
    assert [e["fingerprint"] for e in ledger.events(ledger.EXCHANGED)] == [ledger.fingerprint(token)]


def test_401s_with_a_generic_message_when_the_promise_token_exchange_fails(world):
    """serenity.test.js: '401s with a generic message (no leaked exchange detail) when the promise token exchange
    fails'"""
    response = world.api.post(
        world.path("markets"),
        MINIMUM_BODY,
        promise=False,
        headers={"x-promise-token": "promise-token-xyz", "x-promise-audience": "semrush"},
    )

    body = problem(response, 401, "authenticationRequired")
    assert body["message"] == "Invalid or expired promise token"
    assert Market.objects.count() == 0


def test_a_caller_without_x_promise_token(world):
    """serenity.test.js: 'still 401s a non-IMS caller with no x-promise-token (existing IMS-type gate unaffected)'
    and 'hints at the x-promise-token header when a non-IMS caller sends none' (the session-token caller);
    'falls back to the Authorization bearer when x-promise-token is absent (existing behavior unchanged)' (the
    IMS caller)."""
    response = world.api.post(world.path("markets"), MINIMUM_BODY, promise=False)

    if world.caller.is_session:
        body = problem(response, 401, "promiseTokenRequired")
        assert "x-promise-token" in body["message"]
        assert ledger.count(ledger.EXCHANGED) == 0 and Market.objects.count() == 0
    else:
        assert response.status_code == 201, response.text
        assert ledger.count(ledger.EXCHANGED) == 0
        assert {c["userId"] for c in semrush.calls(path_contains="/ai-projects")} == {world.caller.user_id}


def test_400s_when_brand_id_is_not_a_uuid(world):
    """serenity.test.js: '400s when :brandId is not a UUID (the new guard)'. The original's controller says
    "brandId must be a UUID on the /serenity/* surface"; over HTTP its router answers first, with its own
    sentence. Ours is that sentence: docs/api.md, "Differences from the original", the row on malformed ids."""
    response = world.api.post(f"/v2/orgs/{world.org.id}/brands/adobe-brand-name/serenity/markets", MINIMUM_BODY)

    body = problem(response, 400, "invalidRequest")
    assert body["message"] == "Brand Id is invalid. Please provide a valid UUID."


def test_404s_when_the_brand_does_not_belong_to_the_org(world):
    """serenity.test.js: '404s when the brand does not belong to the org'"""
    foreign = BrandFactory(organization=OrganizationFactory())

    response = world.api.post(world.path("markets", foreign), MINIMUM_BODY)

    problem(response, 404, "notFound")
    assert Market.objects.count() == 0


def test_403s_when_the_user_has_no_access_to_the_org(world):
    """serenity.test.js: '403s when the user has no access to the org'"""
    stranger = world.other_caller(user_id="stranger", org_ids=(OTHER_IMS_ID,))

    response = world.api.post(world.path("markets"), MINIMUM_BODY, caller=stranger)

    body = problem(response, 403, "forbidden")
    assert body["message"] == "User does not have access to this organization"
    assert Market.objects.count() == 0


def test_404s_when_serenity_is_not_active_for_the_brand(world):
    """serenity.test.js: '404s when serenity is not active for the BRAND, without resolving a workspace'"""
    type(world.org).objects.filter(id=world.org.id).update(is_serenity_active=False)

    response = world.api.post(world.path("markets"), MINIMUM_BODY)

    body = problem(response, 404, "notFound")
    assert "serenity is not active" in body["message"].lower()
    assert semrush.calls(path_contains="/ai-projects") == []


def test_404s_when_the_organization_is_not_found(world):
    """serenity.test.js: '404s when the organization is not found' (authorize error branches)"""
    response = world.api.post(
        f"/v2/orgs/8c24224f-d559-478d-a546-9b3f04cc3f78/brands/{world.brand.id}/serenity/markets", MINIMUM_BODY
    )

    problem(response, 404, "notFound")


# --- createMarket ------------------------------------------------------------------------------------------------


def test_create_market_routes_to_the_subworkspace_handler_with_the_brand_and_parent_workspace(world):
    """serenity.test.js: 'createMarket routes to the subworkspace handler with the brand + parent workspace'"""
    response = world.api.post(world.path("markets"), MINIMUM_BODY)

    assert response.status_code == 201, response.text
    body = response.json()
    assert {k: body[k] for k in ("brandId", "geoTargetId", "languageCode", "workspaceId")} == {
        "brandId": str(world.brand.id),
        "geoTargetId": 2840,
        "languageCode": "en",
        "workspaceId": world.brand.semrush_workspace_id,
    }
    assert semrush.project(body["projectId"])["workspaceId"] == world.brand.semrush_workspace_id


def test_create_market_does_not_mirror_a_site_when_the_upstream_create_did_not_return_201(world):
    """serenity.test.js: 'createMarket does NOT mirror a Site when the upstream create did not return 201'"""
    assert world.api.post(world.path("markets"), MINIMUM_BODY).status_code == 201
    sites = set(world.brand.sites.values_list("id", flat=True))

    again = world.api.post(world.path("markets"), MINIMUM_BODY)

    problem(again, 409, "sliceExists")
    assert set(world.brand.sites.values_list("id", flat=True)) == sites


def test_create_market_mirrors_the_brand_host_when_the_market_carries_no_url_of_its_own(world):
    """serenity.test.js: 'createMarket mirrors the brand host when the market carries no url of its own'"""
    response = world.api.post(world.path("markets"), {**MINIMUM_BODY, "brandDomain": "nba.com"})

    assert response.status_code == 201, response.text
    assert Market.objects.get(id=response.json()["id"]).domain == "nba.com"


def test_create_market_400s_on_a_site_id_the_caller_does_not_own_even_alongside_a_brand_domain(world):
    """serenity.test.js: 'createMarket 400s on a siteId the caller does not own, even alongside a brandDomain'"""
    foreign_site = SiteFactory(organization=OrganizationFactory())

    response = world.api.post(world.path("markets"), {**MINIMUM_BODY, "siteId": str(foreign_site.id)})

    problem(response, 400, "invalidRequest")
    assert Market.objects.count() == 0 and semrush.calls(path_contains="/ai-projects") == []


def test_create_market_derives_brand_domain_from_a_supplied_site_id_and_links_that_site(world):
    """serenity.test.js: 'createMarket derives brandDomain from a supplied siteId and links THAT site (LLMO-6405)'"""
    site = SiteFactory(organization=world.org, brand=world.brand, base_url="https://acme.com/markets")

    response = world.api.post(
        world.path("markets"), {"market": "us", "languageCode": "en", "siteId": str(site.id), "brandNames": ["X"]}
    )

    assert response.status_code == 201, response.text
    assert response.json()["siteId"] == str(site.id)
    assert Market.objects.get(id=response.json()["id"]).domain == "acme.com"


def test_create_market_400s_when_a_supplied_site_id_does_not_resolve_to_a_domain(world):
    """serenity.test.js: 'createMarket 400s when a supplied siteId does not resolve to a domain'"""
    response = world.api.post(
        world.path("markets"),
        {"market": "us", "languageCode": "en", "siteId": "8c24224f-d559-478d-a546-9b3f04cc3f78", "brandNames": ["X"]},
    )

    assert problem(response, 400, "invalidRequest")["message"] == "siteId did not resolve to a site domain"
    assert Market.objects.count() == 0


def test_create_market_ignores_a_caller_supplied_primary_url_and_derives_its_own(world):
    """serenity.test.js: 'createMarket ignores a caller-supplied primaryUrl and derives its own'"""
    response = world.api.post(
        world.path("markets"),
        {**MINIMUM_BODY, "brandDomain": "acme.com", "primaryUrl": "evil.example.com/attacker-path"},
    )

    assert response.status_code == 201, response.text
    assert Market.objects.get(id=response.json()["id"]).domain == "acme.com"


def test_create_market_opts_into_topic_generation_when_generate_prompts_is_true(world, async_on):
    """serenity.test.js: 'createMarket opts into topic generation when generatePrompts is true'. Here generation
    is the producer's job: the market answers with its handle."""
    response = world.api.post(world.path("markets"), {**MINIMUM_BODY, "generatePrompts": True})

    assert response.status_code == 201, response.text
    handle = response.json()["promptGeneration"]
    assert (handle["status"], handle["reused"]) == ("provisioning", False)


def test_upstream_failure_maps_to_502_envelope_without_leaking_provider_detail(world):
    """serenity.test.js: 'upstream SerenityTransportError maps to 502 envelope without leaking provider detail'.
    The original's message is "Upstream request failed"; ours names the market to retry (docs/api.md,
    "Differences from the original", the row on a 502's message)."""
    semrush_controls.fail_next(10, status=503, path="/ai-projects", method="POST")

    response = world.api.post(world.path("markets"), MINIMUM_BODY)

    body = problem(response, 502, "serenityUpstreamError")
    assert body["title"] == "Upstream request failed"
    assert body["message"] == "US/en could not be set up in Semrush; retry later."
    assert "/ai-projects" not in response.text and "sandbox" not in response.text
    assert Market.objects.count() == 0


def test_upstream_403_propagates_as_403_forbidden(world):
    """serenity.test.js: 'upstream SerenityTransportError 403 propagates as 403 forbidden'"""
    semrush_controls.fail_next(1, status=403, path="/ai-projects", method="POST")

    response = world.api.post(world.path("markets"), MINIMUM_BODY)

    body = problem(response, 403, "forbidden")
    assert body["message"] == "Upstream authorization failed"
    assert "injected" not in response.text and Market.objects.count() == 0


def test_upstream_401_propagates_as_401_authentication_required(world):
    """serenity.test.js: 'upstream SerenityTransportError 401 propagates as 401 authenticationRequired'"""
    semrush_controls.fail_next(1, status=401, path="/ai-projects", method="POST")

    response = world.api.post(world.path("markets"), MINIMUM_BODY)

    body = problem(response, 401, "authenticationRequired")
    assert body["message"] == "Upstream authorization failed"
    assert "injected" not in response.text and Market.objects.count() == 0


# --- activate -----------------------------------------------------------------------------------------------------


def test_activate_401s_before_any_provisioning_when_the_caller_is_not_ims_authenticated(world):
    """serenity.test.js: 'activate 401s (IMS-only) before any provisioning when the caller is not
    IMS-authenticated'. The session-token caller without x-promise-token is that caller; the IMS caller goes ahead
    with its bearer."""
    response = world.api.post(world.path("activate"), TWO_MARKETS, promise=False)

    if world.caller.is_session:
        problem(response, 401, "promiseTokenRequired")
        assert Market.objects.count() == 0 and semrush.calls(path_contains="/ai-projects") == []
    else:
        assert response.status_code == 200, response.text


def test_activate_ensures_the_subworkspace_once_for_the_batch_and_creates_each_market_against_it(world):
    """serenity.test.js: 'activate ensures the subworkspace ONCE for the batch and creates each market against
    it'"""
    brand = BrandFactory(organization=world.org, semrush_workspace_id=None)
    workspaces = {w["id"] for w in semrush.workspaces(parent_id="serenity")}

    response = world.api.post(world.path("activate", brand), TWO_MARKETS)

    assert response.status_code == 200, response.text
    brand.refresh_from_db()
    assert {w["id"] for w in semrush.workspaces(parent_id="serenity")} - workspaces == {brand.semrush_workspace_id}
    assert [m["status"] for m in response.json()["markets"]] == [201, 201]
    assert {m["body"]["workspaceId"] for m in response.json()["markets"]} == {brand.semrush_workspace_id}
    assert response.json()["status"] == "active"


def test_activate_passes_a_body_supplied_markets_model_ids(world):
    """serenity.test.js: 'activate passes a body-supplied market's modelIds into the options arg (LLMs applied at
    activation)'"""
    response = world.api.post(
        world.path("activate"),
        {
            "brandDomain": "x.com",
            "brandNames": ["X"],
            "markets": [{"market": "us", "languageCode": "en", "modelIds": ["chatgpt", "perplexity"]}],
        },
    )

    assert response.status_code == 200, response.text
    assert Market.objects.get().model_ids == ["chatgpt", "perplexity"]


def test_activate_does_not_downgrade_an_active_brand_when_no_market_goes_live(world):
    """serenity.test.js: 'activate does NOT mirror a Site (or downgrade) when no market goes live on an active
    brand — 207, stays active'"""
    semrush_controls.fail_next(10, status=502, path="/ai-projects", method="POST")

    response = world.api.post(world.path("activate"), {**TWO_MARKETS, "markets": TWO_MARKETS["markets"][:1]})

    assert response.status_code == 207, response.text
    assert response.json()["status"] == "active"
    world.brand.refresh_from_db()
    assert world.brand.status == "active"


def test_activate_400s_when_generate_prompts_is_true_but_there_is_no_primary_url(world):
    """serenity.test.js: 'activate 400s when generatePrompts is true but there is no primary URL (nothing to
    generate into)'"""
    response = world.api.post(world.path("activate"), {"brandNames": ["X"], "generatePrompts": True})

    problem(response, 400, "invalidRequest")
    assert Market.objects.count() == 0


def test_activate_400s_a_pending_brand_with_no_primary_site(world):
    """serenity.test.js: 'activate 400s a pending brand with no primary site instead of provisioning a doomed
    sub-workspace (SITES-49449)'"""
    pending = BrandFactory(organization=world.org, status="pending", with_base_site=False)
    workspaces = len(semrush.workspaces())

    response = world.api.post(world.path("activate", pending), {"brandNames": ["X"]})

    problem(response, 400, "invalidRequest")
    pending.refresh_from_db()
    assert (pending.status, pending.semrush_workspace_id) == ("pending", None)
    assert len(semrush.workspaces()) == workspaces


def test_activate_of_a_pending_brand_with_an_empty_body_is_sub_workspace_only(world):
    """serenity.test.js: 'activate of a pending brand with an empty body is sub-workspace-only (200, no
    project)'"""
    pending = BrandFactory(organization=world.org, status="pending")

    response = world.api.post(world.path("activate", pending), {"brandNames": ["X"]})

    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["markets"]) == ("active", [])
    pending.refresh_from_db()
    assert pending.semrush_workspace_id and semrush.projects(pending.semrush_workspace_id) == []


def test_activate_provisions_a_single_us_en_fallback_project_for_an_empty_markets_array(world):
    """serenity.test.js: 'activate provisions a single US/EN fallback project for an empty markets array + a
    brandDomain'"""
    response = world.api.post(world.path("activate"), {"markets": [], "brandDomain": "x.com", "brandNames": ["X"]})

    assert response.status_code == 200, response.text
    assert [(m["market"], m["languageCode"]) for m in response.json()["markets"]] == [("US", "en")]
    assert len(semrush.projects(world.brand.semrush_workspace_id)) == 1


def test_activate_400s_when_the_markets_array_exceeds_the_cap(world):
    """serenity.test.js: 'activate 400s when the markets array exceeds the cap (and does not provision)'"""
    markets = [{"market": "us", "languageCode": f"l{i}"} for i in range(51)]

    response = world.api.post(world.path("activate"), {"markets": markets, "brandDomain": "x.com", "brandNames": ["X"]})

    problem(response, 400, "invalidRequest")
    assert semrush.calls(path_contains="/ai-projects") == []


def test_activate_returns_200_for_a_mixed_201_and_409_batch(world):
    """serenity.test.js: 'activate returns 200 for a mixed 201 + 409 batch and reports both markets'"""
    assert (
        world.api.post(world.path("markets"), {**MINIMUM_BODY, "market": "de", "languageCode": "de"}).status_code == 201
    )

    response = world.api.post(world.path("activate"), TWO_MARKETS)

    assert response.status_code == 200, response.text
    assert [m["status"] for m in response.json()["markets"]] == [201, 409]
    assert response.json()["status"] == "active"


def test_activate_returns_207_and_stays_active_when_every_market_genuinely_fails(world):
    """serenity.test.js: 'activate returns 207 and stays active when every market genuinely fails on
    reactivation'"""
    semrush_controls.fail_next(10, status=502, path="/ai-projects", method="POST")

    response = world.api.post(world.path("activate"), TWO_MARKETS)

    assert response.status_code == 207, response.text
    assert response.json()["status"] == "active"
    assert [m["status"] for m in response.json()["markets"]] == [502, 502]


def test_activate_returns_200_active_for_an_all_409_idempotent_re_activate(world):
    """serenity.test.js: 'activate returns 200 active for an all-409 idempotent re-activate (markets already
    live)'"""
    assert world.api.post(world.path("activate"), TWO_MARKETS).status_code == 200

    response = world.api.post(world.path("activate"), TWO_MARKETS)

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "active"
    assert [m["status"] for m in response.json()["markets"]] == [409, 409]


def test_activate_sets_the_base_site_and_returns_base_site_id(world):
    """serenity.test.js: 'activate sets brands.site_id to the primary domain's Site and returns baseSiteId
    (200)'"""
    brand = BrandFactory(organization=world.org, semrush_workspace_id=None, with_base_site=False)

    response = world.api.post(world.path("activate", brand), {**TWO_MARKETS, "markets": TWO_MARKETS["markets"][:1]})

    assert response.status_code == 200, response.text
    brand.refresh_from_db()
    assert response.json()["status"] == "active"
    assert response.json()["baseSiteId"] == str(brand.base_site_id)
    assert brand.base_site.base_url == "https://x.com"


def test_activate_does_not_downgrade_an_already_active_brand_on_a_partial_failure(world):
    """serenity.test.js: 'activate does NOT downgrade an already-active brand on a partial failure (207, stays
    active)'"""
    assert world.api.post(world.path("markets"), MINIMUM_BODY).status_code == 201
    semrush_controls.fail_next(10, status=502, path="/ai-projects", method="POST")

    response = world.api.post(world.path("activate"), TWO_MARKETS)

    assert response.status_code == 207, response.text
    assert response.json()["status"] == "active"
    assert [m["status"] for m in response.json()["markets"]] == [409, 502]
    assert Brand.objects.get(id=world.brand.id).status == "active"


def test_activate_falls_back_to_an_empty_body_when_there_is_none(world):
    """serenity.test.js: 'activate falls back to {} body when ctx.data is absent (pending brand →
    sub-workspace-only 200)'"""
    pending = BrandFactory(organization=world.org, status="pending")

    response = world.api.post(world.path("activate", pending), None)

    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["markets"]) == ("active", [])


def test_activate_treats_a_non_array_markets_value_as_empty(world):
    """serenity.test.js: 'activate treats a non-array markets value as empty, falling back to US/EN when a
    brandDomain is present'"""
    response = world.api.post(
        world.path("activate"), {"markets": "not-an-array", "brandDomain": "x.com", "brandNames": ["X"]}
    )

    assert response.status_code == 200, response.text
    assert [(m["market"], m["languageCode"], m["status"]) for m in response.json()["markets"]] == [("US", "en", 201)]


def test_activate_returns_the_authorize_error_without_throwing(world):
    """serenity.test.js: 'activate returns the authorize error without throwing' (error mapping: the caller lacks
    org access)"""
    stranger = world.other_caller(user_id="stranger", org_ids=(OTHER_IMS_ID,))

    response = world.api.post(
        world.path("activate"), {"markets": [{"market": "us", "languageCode": "en"}]}, caller=stranger
    )

    problem(response, 403, "forbidden")
