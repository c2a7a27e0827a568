"""The original's `test/support/serenity/async-prompt-gen.test.js` (adobe/spacecat-api-service), replayed over HTTP
against the running service. The original tests the module's functions one by one (the flag, the requester's id,
the re-authorisation rule, the job's DTO, the producer's handle); here each is observed where the UI meets it:
createMarket's `promptGeneration`, the job the producer leaves, the poll and re-authorisation."""

import pytest

from jobs.models import AsyncJob, JobStatus
from markets.generation import jobtype
from sandbox.semrush import controls as semrush_controls
from tests.conformance.conftest import SECRET
from tests.markets.factories import SiteFactory

MARKET = {"market": "us", "languageCode": "en", "brandDomain": "x.com", "brandNames": ["X"]}
GENERATING = {**MARKET, "generatePrompts": True}
DTO_KEYS = {"jobId", "jobType", "status", "result", "error", "createdAt", "updatedAt"}
# Added beside the original's keys, never instead of one (docs/api.md "The body").
ADDED_KEYS = {"progress"}


def create_market(world, body=GENERATING, brand=None):
    response = world.api.post(world.path("markets", brand), body)
    assert response.status_code == 201, response.text
    return response.json()


def the_job(body) -> AsyncJob:
    return AsyncJob.objects.get(id=body["promptGeneration"]["jobId"])


# --- isAsyncPromptGenEnabled --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("flag", "on"), [("true", True), ("TRUE", True), ("false", False), ("", False)])
def test_is_on_only_for_the_explicit_true_flag(world, settings, flag, on):
    """async-prompt-gen.test.js: 'is on only for the explicit "true" flag'"""
    settings.SERENITY_ASYNC_PROMPT_GEN = flag

    body = create_market(world)

    assert ("promptGeneration" in body) is on
    assert ("promptCount" in body) is not on  # off: the old path wrote the catalogue's prompts
    assert AsyncJob.objects.count() == int(on)


# --- resolveStableImsUserId, callerMayReauth -------------------------------------------------------------------------


def test_reads_only_user_id_never_sub_or_email(world, async_on):
    """async-prompt-gen.test.js: 'reads ONLY user_id — never sub/email'. A session token's user id is its `sub`
    (the IMS user id the original's sign-in puts there), never its email."""
    job = the_job(create_market(world))

    assert job.user_id == world.caller.user_id
    assert "@" not in job.user_id


def test_permits_only_a_matching_resolvable_pair_of_ids(world):
    """async-prompt-gen.test.js: 'permits only a matching, resolvable pair of ids'"""
    error = {"code": jobtype.NEEDS_REAUTH, "message": "dead token", "retryable": False, "needsReauth": True}
    theirs = world.job(status=JobStatus.FAILED, error_code=jobtype.NEEDS_REAUTH, error=error, user_id="U2")
    nobodys = world.job(status=JobStatus.FAILED, error_code=jobtype.NEEDS_REAUTH, error=error, user_id="")
    mine = world.job(status=JobStatus.FAILED, error_code=jobtype.NEEDS_REAUTH, error=error)

    answers = [world.api.post(world.job_path(job.id) + "/reauth", None).status_code for job in (theirs, nobodys, mine)]

    assert answers == [403, 403, 202]


# --- toGenerationJobDto -------------------------------------------------------------------------------------------


def test_never_leaks_the_promise_token_or_raw_metadata(world):
    """async-prompt-gen.test.js: 'never leaks the promise token or raw metadata'"""
    job = world.job(status=JobStatus.IN_PROGRESS)

    response = world.api.get(world.job_path(job.id))

    assert response.status_code == 200, response.text
    for hidden in (SECRET, "promiseToken", "seeds"):
        assert hidden not in response.text
    assert set(response.json()) == DTO_KEYS | ADDED_KEYS
    assert response.json()["jobType"] == "generateSemrushMarket"


def test_projects_a_whitelisted_result_only_when_completed(world):
    """async-prompt-gen.test.js: 'projects a whitelisted result only when COMPLETED'"""
    job = world.job(
        status=JobStatus.COMPLETED,
        result={"promptCount": 5, "projectId": "p9", "published": True, "verdict": "ship", "secretField": "x"},
    )

    body = world.api.get(world.job_path(job.id)).json()

    assert body["result"] == {"promptCount": 5, "projectId": "p9", "published": True, "verdict": "ship"}
    assert body["error"] is None


def test_surfaces_a_needs_reauth_flag_on_a_needs_reauth_failure(world):
    """async-prompt-gen.test.js: 'surfaces a needsReauth flag on a NEEDS_REAUTH failure'. The message is this
    service's fixed public sentence, not the stored one (docs/api.md, "Differences from the original", the row
    on a failed job's message)."""
    job = world.job(
        status=JobStatus.FAILED,
        error_code=jobtype.NEEDS_REAUTH,
        error={"code": jobtype.NEEDS_REAUTH, "message": "dead token", "retryable": False},
    )

    body = world.api.get(world.job_path(job.id)).json()

    assert body["result"] is None
    assert body["error"] == {
        "code": "NEEDS_REAUTH",
        "message": jobtype.PUBLIC_MESSAGES[jobtype.NEEDS_REAUTH],
        "retryable": False,
        "needsReauth": True,
    }


# --- maybeEnqueueMarketGeneration ---------------------------------------------------------------------------------


def test_resolves_site_id_from_the_brand_base_site_when_the_entry_point_supplies_none(world, async_on):
    """async-prompt-gen.test.js: 'resolves siteId from the brand base site when the entry point supplies none
    (SEC-5 scoping)'"""
    job = the_job(create_market(world))

    assert job.site_id == world.brand.base_site_id is not None


def test_keeps_a_supplied_site_id_and_does_not_resolve_the_brand_base_site(world, async_on):
    """async-prompt-gen.test.js: 'keeps a supplied siteId and does not resolve the brand base site'"""
    site = SiteFactory(organization=world.org, brand=world.brand, base_url="https://shop.x.com")

    job = the_job(create_market(world, {**GENERATING, "siteId": str(site.id)}))

    assert job.site_id == site.id != world.brand.base_site_id


def test_leaves_site_id_undefined_when_the_brand_has_no_base_site(world, async_on):
    """async-prompt-gen.test.js: 'leaves siteId undefined (siteless job) when the brand base-site resolve
    throws'. Here the brand has no base site to resolve; the siteless job is still the caller's to poll."""
    brand = world.brand_with_workspace(name="Siteless", with_base_site=False)

    job = the_job(create_market(world, brand=brand))

    assert job.site_id is None
    assert world.api.get(world.job_path(job.id, brand)).status_code == 200


@pytest.mark.parametrize("case", ["feature off", "not requested"])
def test_returns_null_no_enqueue_when_the_feature_is_off_or_not_requested(world, settings, queues, case):
    """async-prompt-gen.test.js: 'returns null (no enqueue) when the feature is off or not requested'"""
    settings.SERENITY_ASYNC_PROMPT_GEN = "false" if case == "feature off" else "true"

    body = create_market(world, GENERATING if case == "feature off" else MARKET)

    assert "promptGeneration" not in body
    assert AsyncJob.objects.count() == 0 and queues.drain() == []


def test_returns_null_on_an_empty_catalogue(world, async_on, queues):
    """async-prompt-gen.test.js: 'returns null on an empty catalogue (no-seeds)'"""
    semrush_controls.set_catalogue(domain="x.com", country="US", items=[])

    body = create_market(world)

    assert "promptGeneration" not in body
    assert queues.drain() == []


def test_passes_the_caller_stable_id_and_maps_an_enqueued_job_to_a_provisioning_handle(world, async_on, queues):
    """async-prompt-gen.test.js: 'passes the caller stable id and maps an enqueued job to a provisioning handle'"""
    body = create_market(world)

    handle = body["promptGeneration"]
    assert handle == {"jobId": handle["jobId"], "status": "provisioning", "reused": False}
    assert the_job(body).user_id == world.caller.user_id
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [handle["jobId"]]
