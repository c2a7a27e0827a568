"""The original's `test/controllers/serenity-market-generation.test.js` (adobe/spacecat-api-service), replayed
over HTTP against the running service: polling a generation job and re-authorising it."""

from jobs.models import JobStatus
from markets.generation import jobtype
from sandbox.ims import ledger
from tests.conformance.conftest import OTHER_IMS_ID, SECRET, problem
from tests.markets.factories import BrandFactory, OrganizationFactory
from tokens.services import grant_load

RESULT = {"promptCount": 4, "projectId": "p1", "published": True, "verdict": "ship"}


def awaiting_reauth(world, **fields):
    return world.job(
        status=JobStatus.FAILED,
        phase="generated",
        error_code=jobtype.NEEDS_REAUTH,
        error={"code": jobtype.NEEDS_REAUTH, "message": "dead token", "retryable": False, "needsReauth": True},
        **fields,
    )


def reauth(world, job, **kwargs):
    return world.api.post(world.job_path(job.id) + "/reauth", None, **kwargs)


# --- getSemrushMarketGenerationJobStatus (polling) ----------------------------------------------------------------


def test_returns_a_token_safe_dto_for_an_owned_job(world):
    """serenity-market-generation.test.js: 'returns a token-safe DTO for an owned job'"""
    job = world.job(status=JobStatus.COMPLETED, result=RESULT)

    response = world.api.get(world.job_path(job.id))

    assert response.status_code == 200, response.text
    assert SECRET not in response.text
    assert response.json()["jobType"] == "generateSemrushMarket"
    assert response.json()["result"]["promptCount"] == 4


def test_404s_a_job_belonging_to_another_brand(world):
    """serenity-market-generation.test.js: '404s a job belonging to another brand'"""
    job = world.job(brand=BrandFactory(organization=world.org))

    response = world.api.get(world.job_path(job.id))

    problem(response, 404, "notFound")


def test_passes_through_the_primitive_access_error(world):
    """serenity-market-generation.test.js: 'passes through the primitive access error'. The primitive's 404 for a
    job of an organization the caller is not a member of (the original's organization check would say 403 first:
    docs/api.md, "Differences from the original", the row on job reads)."""
    other_org = OrganizationFactory(ims_org_id=OTHER_IMS_ID)
    job = world.job(brand=BrandFactory(organization=other_org), organization_id=other_org.id)

    response = world.api.get(f"/v2/orgs/{other_org.id}/brands/{job.brand_id}/serenity/markets/generation/jobs/{job.id}")

    assert problem(response, 404, "notFound")["code"] == "job_not_found"


def test_400s_an_invalid_job_id(world):
    """serenity-market-generation.test.js: '400s an invalid jobId'"""
    response = world.api.get(world.job_path("not-a-uuid"))

    problem(response, 400, "invalidRequest")


# --- reauthSemrushMarketGenerationJob (Gap 6) ---------------------------------------------------------------------


def test_re_authenticates_swaps_the_token_flips_to_in_progress_and_re_enqueues_the_same_job_id(world, queues):
    """serenity-market-generation.test.js: 're-authenticates, swaps the token, flips to IN_PROGRESS, and
    re-enqueues the same job id'"""
    job = awaiting_reauth(world)

    response = reauth(world, job)

    assert response.status_code == 202, response.text
    assert response.json() == {"jobId": str(job.id), "jobType": "generateSemrushMarket", "status": "IN_PROGRESS"}
    job.refresh_from_db()
    assert (job.status, job.error) == ("IN_PROGRESS", None)
    assert grant_load(job.id).pair.name == "semrush"
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(job.id), "type": "generateSemrushMarket"}]


def test_403s_a_different_ims_user(world):
    """serenity-market-generation.test.js: '403s a different IMS user (fail-closed strict claim)'"""
    job = awaiting_reauth(world)
    someone_else = world.other_caller(user_id="U2")
    headers = someone_else.headers(promise=True)
    minted = ledger.count(ledger.MINTED)

    response = world.api.http.post(world.job_path(job.id) + "/reauth", headers=headers)

    problem(response, 403, "forbidden")
    assert ledger.count(ledger.MINTED) == minted and ledger.count(ledger.EXCHANGED) == 0


def test_403s_when_the_original_user_id_is_unresolvable(world):
    """serenity-market-generation.test.js: '403s when the original user id is unresolvable (fail-closed)'"""
    job = awaiting_reauth(world, user_id=None)

    response = reauth(world, job)

    problem(response, 403, "forbidden")
    job.refresh_from_db()
    assert job.status == "FAILED"


def test_409s_a_job_not_awaiting_re_authentication(world):
    """serenity-market-generation.test.js: '409s a job not awaiting re-authentication'"""
    job = world.job(status=JobStatus.IN_PROGRESS)

    response = reauth(world, job)

    problem(response, 409, "invalidState")


def test_400s_when_the_semrush_promise_pair_is_not_presented(world):
    """serenity-market-generation.test.js: '400s when the Semrush promise pair is not presented'"""
    job = awaiting_reauth(world)
    headers = world.caller.headers(promise=True)
    del headers["x-promise-audience"]
    minted = ledger.count(ledger.MINTED)

    response = world.api.http.post(world.job_path(job.id) + "/reauth", headers=headers)

    problem(response, 400, "invalidRequest")
    assert ledger.count(ledger.MINTED) == minted and ledger.count(ledger.EXCHANGED) == 0
