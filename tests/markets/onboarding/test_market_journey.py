"""The UI's market journey around onboarding (SPEC §3.1): the Markets tab's list with each market's generation, one
market by its slice, deleting a market (without a generation running: tests/markets/generation/test_market_deletion.py
has the cancellation), and the add-brand wizard's catalogues. The original's own test cases, replayed over HTTP,
are in tests/conformance/test_market_journey.py."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import AsyncJob, JobStatus
from markets.generation.jobtype import MARKET_GENERATION_JOB_TYPE, NEEDS_REAUTH, generation_job_id
from markets.models import Market
from sandbox.ims.sessions import issue_session_token
from sandbox.semrush import controls as semrush_controls
from sandbox.semrush import state as semrush
from tests.markets.factories import BrandFactory, GenerationJobFactory, OrganizationFactory, SiteFactory

UNKNOWN = str(uuid.uuid4())


def problem(response, status: int, error: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert (body["status"], body["error"]) == (status, error), body
    return body


def create(world, market="FR", language="fr", **fields):
    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": market, "languageCode": language, **fields},
        **{"x-promise-audience": "semrush"},
    )
    assert response.status_code == 201, response.content
    return Market.objects.get(id=response.json()["id"])


def slice_url(world, market: Market | None = None, *, geo=None, language=None, brand=None) -> str:
    brand = brand or world.brand
    geo = geo if geo is not None else market.geo_target_id
    language = language if language is not None else market.language_code
    return f"/v2/orgs/{world.org.id}/brands/{brand.id}/serenity/markets/{geo}/{language}"


def generation_job(world, market: Market, **fields) -> AsyncJob:
    values = {
        "id": generation_job_id(world.brand.id, market.geo_target_id, market.language_code),
        "organization_id": world.org.id,
        "brand_id": world.brand.id,
        "site_id": world.brand.base_site_id,
        "user_id": world.user_id,
        "params": {"marketId": str(market.id), "seeds": [{"topic": "SECRET-SEED"}]},
        "checkpoints": {"batch": {"prompts": [{"prompt": "SECRET-PROMPT"}]}},
    }
    return GenerationJobFactory(**{**values, **fields})


# --- listMarkets --------------------------------------------------------------------------------------------------


def test_the_brands_markets_are_listed_oldest_first_with_the_originals_fields_and_their_generation(world):
    france = create(world, "FR", "fr")
    germany = create(world, "DE", "de", siteId=str(world.brand.base_site_id))
    job = generation_job(world, germany, status=JobStatus.FAILED, error_code=NEEDS_REAUTH, error={"code": NEEDS_REAUTH})

    response = world.client.get(world.url("markets"))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {
        "items": [
            {
                "brandId": str(world.brand.id),
                "geoTargetId": 2250,
                "languageCode": "fr",
                "createdAt": body["items"][0]["createdAt"],
                "updatedAt": body["items"][0]["updatedAt"],
                "status": "live",
                "semrushProjectId": france.semrush_project_id,
                "domain": world.brand.domain,
                "primaryUrl": world.brand.domain,
                "siteId": str(world.brand.base_site_id),
                "id": str(france.id),
                "market": "FR",
                "name": "FR-fr",
                "publishState": "published",
                "promptGeneration": None,
            },
            {
                "brandId": str(world.brand.id),
                "geoTargetId": 2276,
                "languageCode": "de",
                "createdAt": body["items"][1]["createdAt"],
                "updatedAt": body["items"][1]["updatedAt"],
                "status": "live",
                "semrushProjectId": germany.semrush_project_id,
                "domain": world.brand.domain,
                "primaryUrl": world.brand.domain,
                "siteId": str(world.brand.base_site_id),
                "id": str(germany.id),
                "market": "DE",
                "name": "DE-de",
                "publishState": "published",
                "promptGeneration": {
                    "jobId": str(job.id),
                    "status": "FAILED",
                    "error": {
                        "code": "NEEDS_REAUTH",
                        "message": "Authorisation to write to Semrush has expired. Re-authorise to continue.",
                        "retryable": False,
                        "needsReauth": True,
                    },
                },
            },
        ]
    }
    assert "SECRET" not in response.content.decode()


@pytest.mark.worker
def test_the_list_shows_a_markets_generation_through_its_end(world, async_on, celery_worker):
    from sandbox.drs import controls as drs_controls
    from tests.waits import wait_terminal

    drs_controls.set_latency(1000)  # still generating when the list is read
    market = create(world, generatePrompts=True)
    job = AsyncJob.objects.get(id=generation_job_id(world.brand.id, 2250, "fr"))

    (running,) = world.client.get(world.url("markets")).json()["items"]
    wait_terminal(job)
    (ended,) = world.client.get(world.url("markets")).json()["items"]

    assert running["id"] == ended["id"] == str(market.id)
    assert running["promptGeneration"] == {"jobId": str(job.id), "status": "IN_PROGRESS", "error": None}
    assert ended["promptGeneration"] == {"jobId": str(job.id), "status": "COMPLETED", "error": None}


def test_a_brand_without_markets_lists_none(world):
    response = world.client.get(world.url("markets"))

    assert (response.status_code, response.json()) == (200, {"items": []})


def test_a_market_whose_semrush_project_is_not_made_yet_is_not_listed(world):
    Market.objects.create(brand=world.brand, country="FR", language_code="fr", geo_target_id=2250)

    assert world.client.get(world.url("markets")).json() == {"items": []}
    problem(world.client.get(slice_url(world, geo=2250, language="fr")), 404, "marketNotFound")


def test_a_job_an_earlier_market_of_the_slice_left_is_not_the_new_markets_generation(world):
    market = create(world)
    generation_job(world, market, params={"marketId": str(uuid.uuid4())}, status=JobStatus.FAILED)

    (item,) = world.client.get(world.url("markets")).json()["items"]

    assert item["promptGeneration"] is None


def test_a_job_naming_a_site_the_caller_cannot_access_is_not_shown(world):
    market = create(world)
    stranger_site = SiteFactory(organization=OrganizationFactory())
    generation_job(world, market, site_id=stranger_site.id)

    (item,) = world.client.get(world.url("markets")).json()["items"]

    assert item["promptGeneration"] is None


def test_the_list_costs_the_same_queries_for_one_market_as_for_many(world):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert world.client.get(world.url("markets")).status_code == 200
        return len(captured)

    generation_job(world, create(world, "FR", "fr"))
    one = queries()
    for country, language in (("DE", "de"), ("ES", "es"), ("IT", "it"), ("NL", "nl")):
        generation_job(world, create(world, country, language))
    many = queries()

    assert len(world.client.get(world.url("markets")).json()["items"]) == 5
    assert many == one


def test_a_market_on_a_site_of_its_own_shows_the_sites_url_as_its_primary_url(world):
    site = SiteFactory(organization=world.org, brand=world.brand, base_url="https://shop.nordlicht-outdoor.example/fr/")
    response = world.post(
        world.url("markets"), {"market": "FR", "languageCode": "fr", "siteId": str(site.id), "brandNames": ["N"]}
    )
    market = Market.objects.get(id=response.json()["id"])

    (item,) = world.client.get(world.url("markets")).json()["items"]

    assert (item["domain"], item["primaryUrl"], item["siteId"]) == (
        "shop.nordlicht-outdoor.example",
        "shop.nordlicht-outdoor.example/fr",
        str(site.id),
    )
    assert item["id"] == str(market.id)


def test_a_session_caller_lists_and_reads_markets_without_a_promise_token(world):
    market = create(world)
    world.client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {issue_session_token(user_id=world.user_id, org_ids=[world.org.ims_org_id])}"
    )

    assert world.client.get(world.url("markets")).status_code == 200
    assert world.client.get(slice_url(world, market)).status_code == 200


# --- getMarket ----------------------------------------------------------------------------------------------------


def test_a_market_is_read_by_its_slice_with_its_semrush_project_id(world):
    market = create(world)

    response = world.client.get(slice_url(world, market))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {
        "brandId": str(world.brand.id),
        "geoTargetId": 2250,
        "languageCode": "fr",
        "createdAt": body["createdAt"],
        "updatedAt": body["updatedAt"],
        "status": "live",
        "semrushProjectId": market.semrush_project_id,
        "domain": world.brand.domain,
        "primaryUrl": world.brand.domain,
        "siteId": str(world.brand.base_site_id),
        "id": str(market.id),
        "market": "FR",
        "name": "FR-fr",
        "publishState": "published",
        "promptGeneration": None,
    }


@pytest.mark.parametrize(("geo", "language"), [("2250", "FR"), ("02250", "fr"), ("2250", "Fr")])
def test_the_slice_is_read_as_the_original_reads_it(world, geo, language):
    market = create(world)

    response = world.client.get(slice_url(world, geo=geo, language=language))

    assert (response.status_code, response.json()["id"]) == (200, str(market.id))


@pytest.mark.parametrize(
    ("geo", "language"),
    [("2276", "fr"), ("2250", "de"), ("1023191", "fr"), ("9" * 40, "fr"), ("2250", "de-ch")],
)
def test_a_slice_without_a_market_is_404_market_not_found(world, geo, language):
    create(world)

    body = problem(world.client.get(slice_url(world, geo=geo, language=language)), 404, "marketNotFound")

    assert body["message"] == "No market for this brand and (geoTargetId, languageCode) slice"


@pytest.mark.parametrize(
    ("geo", "language", "parameters"),
    [
        ("2840abc", "en", ["geoTargetId"]),
        ("0", "en", ["geoTargetId"]),
        ("-1", "en", ["geoTargetId"]),
        ("2840.0", "en", ["geoTargetId"]),
        ("%2B2840", "en", ["geoTargetId"]),  # a sign is no digit
        ("2840", "zz9", ["languageCode"]),
        ("2840", "english", ["languageCode"]),
        ("x", "1z", ["geoTargetId", "languageCode"]),
    ],
)
def test_a_malformed_slice_is_400_naming_the_part(world, geo, language, parameters):
    for method in (world.client.get, world.client.delete):
        body = problem(method(slice_url(world, geo=geo, language=language)), 400, "invalidRequest")

        assert [e["parameter"] for e in body["errors"]] == parameters
        assert body["message"] == "; ".join(
            {
                "geoTargetId": "geoTargetId must be a positive integer",
                "languageCode": "languageCode must match ^[a-z]{2,3}(-[a-z]{2,4})?$",
            }[p]
            for p in parameters
        )


def test_another_tenants_brand_answers_exactly_as_a_brand_that_does_not_exist(world, bearer):
    other_org = OrganizationFactory()
    other_brand = BrandFactory(organization=other_org, semrush_workspace_id="ws-other")
    Market.objects.create(
        brand=other_brand, country="FR", language_code="fr", geo_target_id=2250, semrush_project_id="prj-other"
    )
    foreign = f"/v2/orgs/{world.org.id}/brands/{other_brand.id}/serenity/markets"
    missing = f"/v2/orgs/{world.org.id}/brands/{UNKNOWN}/serenity/markets"

    for method, tail in ((world.client.get, ""), (world.client.get, "/2250/fr"), (world.client.delete, "/2250/fr")):
        stranger, absent = method(foreign + tail), method(missing + tail)
        assert stranger.status_code == absent.status_code == 404
        assert stranger.content == absent.content.replace(UNKNOWN.encode(), str(other_brand.id).encode())
        assert stranger["x-error"] == absent["x-error"].replace(UNKNOWN, str(other_brand.id))
    assert Market.objects.filter(brand=other_brand).count() == 1
    assert semrush.calls(method="DELETE") == []


def test_an_organization_the_caller_is_not_a_member_of_is_403_whatever_it_holds(world):
    other_org = OrganizationFactory()
    other_brand = BrandFactory(organization=other_org)
    base = f"/v2/orgs/{other_org.id}/brands"

    for path in (f"{base}/{other_brand.id}/serenity/markets", f"{base}/{UNKNOWN}/serenity/markets"):
        problem(world.client.get(path), 403, "forbidden")
        problem(world.client.get(path + "/2250/fr"), 403, "forbidden")
        problem(world.client.delete(path + "/2250/fr"), 403, "forbidden")


# --- deleteMarket -------------------------------------------------------------------------------------------------


def test_deleting_a_market_deletes_its_semrush_project_then_the_market(world):
    market = create(world)
    project_id = market.semrush_project_id

    response = world.client.delete(slice_url(world, market))

    assert (response.status_code, response.content) == (204, b"")
    assert not Market.objects.filter(id=market.id).exists()
    assert semrush.project(project_id) is None
    assert [c["status"] for c in semrush.calls(method="DELETE")] == [204]
    assert world.client.get(world.url("markets")).json() == {"items": []}


def test_deleting_a_slice_without_a_market_is_204_and_calls_nothing(world):
    market = create(world)
    assert world.client.delete(slice_url(world, market)).status_code == 204
    mark = semrush.last_call_seq()

    again = world.client.delete(slice_url(world, market))
    never = world.client.delete(slice_url(world, geo=2840, language="en"))
    no_country = world.client.delete(slice_url(world, geo="9" * 40, language="fr"))

    assert (again.status_code, never.status_code, no_country.status_code) == (204, 204, 204)
    assert semrush.calls(after=mark) == []


def test_a_project_semrush_no_longer_has_is_deleted_all_the_same(world):
    from markets.clients.semrush import SemrushClient

    market = create(world)
    SemrushClient(world.token).delete_project(  # by another hand, first
        workspace_id=world.brand.semrush_workspace_id, project_id=market.semrush_project_id
    )

    response = world.client.delete(slice_url(world, market))

    assert response.status_code == 204
    assert not Market.objects.filter(id=market.id).exists()
    assert [c["status"] for c in semrush.calls(method="DELETE")] == [204, 404]


def test_a_semrush_failure_keeps_the_market_and_answers_502(world):
    market = create(world)
    semrush_controls.fail_next(4, status=503, path="/ai-projects/", method="DELETE")  # outlasts the retries

    body = problem(world.client.delete(slice_url(world, market)), 502, "serenityUpstreamError")

    assert body["message"] == "FR/fr could not be deleted in Semrush; retry later."
    market.refresh_from_db()
    assert market.deletion_hold is None  # open again: generation may write, another delete may go
    assert semrush.project(market.semrush_project_id) is not None
    assert world.client.delete(slice_url(world, market)).status_code == 204


@pytest.mark.parametrize(("status", "error"), [(401, "authenticationRequired"), (403, "forbidden")])
def test_semrush_refusing_the_credential_keeps_the_market(world, status, error):
    market = create(world)
    semrush_controls.fail_next(1, status=status, path="/ai-projects/", method="DELETE")

    body = problem(world.client.delete(slice_url(world, market)), status, error)

    assert body["message"] == "Upstream authorization failed"
    assert Market.objects.filter(id=market.id, deletion_hold__isnull=True).exists()


def test_a_session_caller_deletes_with_a_promise_token_and_is_refused_without_one(world, bearer):
    from sandbox.ims import ledger
    from tokens.clients import ims
    from tokens.pairs import get_pair

    market = create(world)
    world.client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {issue_session_token(user_id=world.user_id, org_ids=[world.org.ims_org_id])}"
    )

    problem(world.client.delete(slice_url(world, market)), 401, "promiseTokenRequired")
    assert Market.objects.filter(id=market.id).exists()

    promise = ims.mint(bearer=world.token, pair=get_pair("semrush")).promise_token
    response = world.client.delete(
        slice_url(world, market), headers={"x-promise-token": promise, "x-promise-audience": "semrush"}
    )

    assert response.status_code == 204, response.content
    assert not Market.objects.filter(id=market.id).exists()
    assert ledger.live_tokens() == 0  # the token IMS rotated for the request served nothing: invalidated


def test_a_market_being_deleted_cannot_be_regenerated(world, async_on):
    from markets.generation import fence

    market = create(world)
    fence.market_hold(market.id)

    response = world.post(
        f"/v2/orgs/{world.org.id}/brands/{world.brand.id}/serenity/markets/{market.id}/generation",
        {},
        **{"x-promise-audience": "semrush"},
    )

    problem(response, 404, "notFound")
    assert not AsyncJob.objects.filter(job_type=MARKET_GENERATION_JOB_TYPE).exists()


# --- createMarket's language ---------------------------------------------------------------------------------------


def test_a_language_semrush_does_not_support_is_refused_before_the_brands_sub_workspace_is_made(world):
    brand = BrandFactory(organization=world.org, semrush_workspace_id=None)
    workspaces = len(semrush.workspaces())

    body = problem(
        world.post(
            f"/v2/orgs/{world.org.id}/brands/{brand.id}/serenity/markets",
            {"market": "HR", "languageCode": "hr", "brandDomain": brand.domain, "brandNames": [brand.name]},
        ),
        400,
        "unknownLanguage",
    )

    assert body["message"] == "Language 'hr' not found"
    assert len(semrush.workspaces()) == workspaces
    brand.refresh_from_db()
    assert brand.semrush_workspace_id is None and not Market.objects.filter(brand=brand).exists()


# --- The wizard's catalogues ---------------------------------------------------------------------------------------


def catalogue_url(world, name: str, org=None) -> str:
    return f"/v2/orgs/{org or world.org.id}/serenity/{name}"


def test_the_languages_are_semrushs_catalogue_sorted_by_name(world):
    from markets import geo

    response = world.client.get(catalogue_url(world, "languages"))

    assert response.status_code == 200, response.content
    items = response.json()["items"]
    expected = sorted(geo.known_languages(), key=lambda item: item["name"].casefold())
    assert items == [{"id": item["id"], "name": item["name"], "code": item["code"]} for item in expected]
    assert [i["name"] for i in items][:3] == ["Afrikaans", "Arabic", "Armenian"]


def test_the_models_are_semrushs_global_catalogue(world):
    from sandbox.semrush.ai_models import AI_MODELS

    response = world.client.get(catalogue_url(world, "models"))

    assert response.status_code == 200, response.content
    assert response.json() == {"items": [dict(model) for model in AI_MODELS]}


@pytest.mark.parametrize("name", ["languages", "models"])
@pytest.mark.parametrize("status", [404, 405])
def test_a_catalogue_semrush_does_not_serve_is_an_empty_list(world, name, status):
    from markets.clients import semrush as client_module

    client_module._languages.clear()
    semrush_controls.fail_next(1, status=status, path=f"/v1/{'languages' if name == 'languages' else 'ai_models'}")

    response = world.client.get(catalogue_url(world, name))

    assert (response.status_code, response.json()) == (200, {"items": []})


@pytest.mark.parametrize("name", ["languages", "models"])
@pytest.mark.parametrize(
    ("status", "answer", "error"),
    [(503, 502, "serenityUpstreamError"), (401, 401, "authenticationRequired"), (403, 403, "forbidden")],
)
def test_a_catalogue_semrush_fails_to_give_is_answered_as_the_original(world, name, status, answer, error):
    from markets.clients import semrush as client_module

    client_module._languages.clear()
    semrush_controls.fail_next(4, status=status, path=f"/v1/{'languages' if name == 'languages' else 'ai_models'}")

    problem(world.client.get(catalogue_url(world, name)), answer, error)


@pytest.mark.parametrize("name", ["languages", "models"])
def test_the_catalogues_are_the_organizations_members_alone(world, name):
    other = OrganizationFactory()

    problem(world.client.get(catalogue_url(world, name, org=other.id)), 403, "forbidden")
    problem(world.client.get(catalogue_url(world, name, org=UNKNOWN)), 404, "notFound")
    problem(world.client.get(catalogue_url(world, name, org="not-a-uuid")), 400, "invalidRequest")


@pytest.mark.parametrize("name", ["languages", "models"])
def test_a_catalogue_needs_no_brand_and_no_active_serenity(world, name):
    world.org.is_serenity_active = False
    world.org.save(update_fields=["is_serenity_active"])

    assert world.client.get(catalogue_url(world, name)).status_code == 200


@pytest.mark.parametrize("name", ["languages", "models"])
def test_a_session_caller_reads_a_catalogue_with_a_promise_token_and_is_refused_without_one(world, name):
    from tokens.clients import ims
    from tokens.pairs import get_pair

    world.client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {issue_session_token(user_id=world.user_id, org_ids=[world.org.ims_org_id])}"
    )
    problem(world.client.get(catalogue_url(world, name)), 401, "promiseTokenRequired")

    promise = ims.mint(bearer=world.token, pair=get_pair("semrush")).promise_token
    response = world.client.get(
        catalogue_url(world, name), headers={"x-promise-token": promise, "x-promise-audience": "semrush"}
    )

    assert response.status_code == 200 and response.json()["items"]
