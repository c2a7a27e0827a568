"""Who may see which job: the access matrix of issue 6, for polling and re-authorisation alike.

Every denial must answer a 404 whose bytes equal those of a job that does not exist.
"""

import itertools
import uuid

import pytest

from markets.exceptions import JobNotFound
from markets.generation.selectors import job_get_for_caller
from serenity.auth import Caller
from tests.markets.factories import SiteFactory
from tests.markets.generation.conftest import CALLER_ORG, REQUESTER, make_job, needs_reauth_fields

ORGS = ("same org", "other org")
BRANDS = ("same brand", "other brand")
SITES = ("accessible site", "inaccessible site", "no site")
TYPES = ("allowed type", "other type")
IDS = ("existing id", "missing id")
MATRIX = list(itertools.product(ORGS, BRANDS, SITES, TYPES, IDS))
VISIBLE = {
    ("same org", "same brand", "accessible site", "allowed type", "existing id"),
    ("same org", "same brand", "no site", "allowed type", "existing id"),
}


def place_job(tenants, org_case, brand_case, site_case, type_case, **fields):
    """A job whose ownership differs from the requested path (tenants.org / tenants.brand) as the cell says."""
    org = tenants.org if org_case == "same org" else tenants.other_org
    if brand_case == "same brand":
        brand = tenants.brand
    else:
        brand = tenants.sibling_brand if org_case == "same org" else tenants.other_brand
    site = {"accessible site": tenants.site, "inaccessible site": tenants.third_site, "no site": None}[site_case]
    job_type = "generateSemrushMarket" if type_case == "allowed type" else "refreshSemrushMarket"
    return make_job(org=org, brand=brand, site=site, job_type=job_type, **fields)


def missing_job_404(api, tenants) -> bytes:
    response = api.poll(tenants.org.id, tenants.brand.id, uuid.uuid4())
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "https://errors.serenity.example/job-not-found",
        "title": "Job not found",
        "status": 404,
        "detail": "Job not found",
        "code": "job_not_found",
        "error": "notFound",
        "message": "Job not found",
    }
    assert response["x-error"] == "Job not found"
    return response.content


@pytest.mark.parametrize(
    ("org_case", "brand_case", "site_case", "type_case", "id_case"), MATRIX, ids=[" / ".join(cell) for cell in MATRIX]
)
def test_a_job_is_visible_only_in_its_own_org_brand_and_accessible_site(
    tenants, api, org_case, brand_case, site_case, type_case, id_case
):
    job = place_job(tenants, org_case, brand_case, site_case, type_case)
    job_id = job.id if id_case == "existing id" else uuid.uuid4()

    response = api.poll(tenants.org.id, tenants.brand.id, job_id)

    if (org_case, brand_case, site_case, type_case, id_case) in VISIBLE:
        assert response.status_code == 200
        assert response.json()["jobId"] == str(job.id)
    else:
        assert response.status_code == 404
        assert response.content == missing_job_404(api, tenants)


def test_a_job_without_a_site_is_decided_by_org_and_brand_ownership_alone(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.bare_brand, site=None)

    response = api.poll(tenants.org.id, tenants.bare_brand.id, job.id)

    assert response.status_code == 200
    assert response.json()["jobId"] == str(job.id)


def test_a_job_whose_site_no_longer_exists_is_denied(tenants, api):
    gone = SiteFactory(organization=tenants.org, base_url="https://gone.example")
    job = make_job(org=tenants.org, brand=tenants.brand, site=gone)
    gone.delete()

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 404
    assert response.content == missing_job_404(api, tenants)


@pytest.mark.parametrize(
    "case",
    [
        "unknown org",
        "org the caller is not a member of",
        "brand of another org under the caller's org",
        "brand that does not exist",
    ],
)
def test_a_path_the_caller_may_not_use_answers_the_missing_job_404(tenants, api, case):
    if case == "unknown org":
        job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
        org_id, brand_id = uuid.uuid4(), tenants.brand.id
    elif case == "org the caller is not a member of":
        job = make_job(org=tenants.other_org, brand=tenants.other_brand, site=tenants.other_brand.base_site)
        org_id, brand_id = tenants.other_org.id, tenants.other_brand.id
    elif case == "brand of another org under the caller's org":
        # A job row claiming the caller's org for a brand that belongs elsewhere.
        job = make_job(org=tenants.org, brand=tenants.other_brand, site=tenants.site)
        org_id, brand_id = tenants.org.id, tenants.other_brand.id
    else:
        job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, brand_id=uuid.uuid4())
        org_id, brand_id = tenants.org.id, job.brand_id

    response = api.poll(org_id, brand_id, job.id)

    assert response.status_code == 404
    assert response.content == missing_job_404(api, tenants)


def test_a_caller_without_any_organization_sees_nothing(tenants, bearer):
    from tests.markets.generation.conftest import Api

    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    stranger = Api(bearer(user_id=REQUESTER, org_ids=[]))

    response = stranger.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 404
    assert response.content == missing_job_404(stranger, tenants)


@pytest.mark.parametrize(
    ("org_case", "brand_case", "site_case", "type_case"),
    [
        ("other org", "other brand", "accessible site", "allowed type"),
        ("same org", "other brand", "accessible site", "allowed type"),
        ("same org", "same brand", "inaccessible site", "allowed type"),
        ("same org", "same brand", "accessible site", "other type"),
    ],
)
def test_reauthorisation_denies_exactly_like_polling(tenants, api, ims, org_case, brand_case, site_case, type_case):
    job = place_job(tenants, org_case, brand_case, site_case, type_case, **needs_reauth_fields())

    response = api.reauth(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 404
    assert response.content == missing_job_404(api, tenants)
    job.refresh_from_db()
    assert (job.status, job.error_code) == ("FAILED", "NEEDS_REAUTH")
    assert ims.count("minted") == 0


def test_the_selector_raises_the_same_error_for_every_denial(tenants):
    caller = Caller(user_id=REQUESTER, org_ids=frozenset({CALLER_ORG}), bearer="unused")
    foreign = make_job(org=tenants.other_org, brand=tenants.other_brand, site=None)

    raised = []
    for job_id, allowed in ((foreign.id, ("generateSemrushMarket",)), (uuid.uuid4(), ("generateSemrushMarket",))):
        with pytest.raises(JobNotFound) as denied:
            job_get_for_caller(
                caller=caller, org_id=tenants.org.id, brand_id=tenants.brand.id, job_id=job_id, allowed_types=allowed
            )
        raised.append((type(denied.value), denied.value.detail, denied.value.errors))

    assert raised[0] == raised[1] == (JobNotFound, "Job not found", None)
