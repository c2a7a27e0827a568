"""Fixtures of the API tests: a small world of organizations, brands, sites and generation jobs, and
helpers that call the polling and re-authorisation endpoints with a caller's bearer."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from markets.generation.jobtype import NEEDS_REAUTH
from markets.models import Brand, Organization, Site
from tests.markets.factories import BrandFactory, GenerationJobFactory, OrganizationFactory, SiteFactory

CALLER_ORG = "CALLER0000000000000000@AdobeOrg"
OTHER_ORG = "OTHER00000000000000000@AdobeOrg"
THIRD_ORG = "THIRD00000000000000000@AdobeOrg"
REQUESTER = "requester-user-id"

# Planted in every stored field the DTO must not show; no response may contain it.
SECRET = "PLANTED-SECRET-7f3a9c"


def make_org(ims_org_id: str) -> Organization:
    return OrganizationFactory(ims_org_id=ims_org_id, name=ims_org_id.split("@")[0].title())


def make_brand(org: Organization, name: str, *, base_site: bool = True, workspace_token: str | None = None) -> Brand:
    """An active brand. With `workspace_token` its Semrush workspace is created in the simulator with that
    bearer (for tests that reach Semrush); otherwise it names a workspace that exists nowhere."""
    workspace = f"ws-{name.lower()}"
    if workspace_token is not None:
        from markets.clients.semrush import SemrushClient

        workspace = SemrushClient(workspace_token).create_workspace(name=name, parent_id="serenity")
    return BrandFactory(
        organization=org,
        name=name,
        domain=f"{name.lower()}.example",
        aliases=[],
        semrush_workspace_id=workspace,
        with_base_site=base_site,
    )


def make_job(*, org: Organization, brand: Brand | None, site: Site | None, **fields) -> AsyncJob:
    """A generation job as the producer would leave it (GenerationJobFactory's defaults), with SECRET planted in
    what must stay private."""
    now = timezone.now()
    values = {
        "organization_id": org.id,
        "brand_id": brand.id if brand else None,
        "site_id": site.id if site else None,
        "user_id": REQUESTER,
        "params": {"brand": "Acme", "seeds": [{"topic": "t", "example_prompts": [SECRET]}], "token": SECRET},
        "checkpoints": {"batch": {"prompts": [{"prompt": SECRET}]}, "note": SECRET},
        "created_at": now - timedelta(minutes=5),
        "updated_at": now,
    }
    values.update(fields)
    return GenerationJobFactory(**values)


def needs_reauth_fields() -> dict:
    return {
        "status": JobStatus.FAILED,
        "phase": "generated",
        "error_code": NEEDS_REAUTH,
        "error": {
            "code": NEEDS_REAUTH,
            "message": f"IMS refused the promise token {SECRET}",
            "retryable": False,
            "needsReauth": True,
        },
        "ended_at": timezone.now(),
    }


class Tenants:
    """The caller belongs to CALLER_ORG only. `brand` (with a base site) and `bare_brand` (none) are
    the caller's; `other_brand` lives in OTHER_ORG; `third_site` in THIRD_ORG, which the caller cannot see."""

    def __init__(self):
        self.org = make_org(CALLER_ORG)
        self.brand = make_brand(self.org, "Acme")
        self.sibling_brand = make_brand(self.org, "Sibling")
        self.bare_brand = make_brand(self.org, "Bare", base_site=False)
        self.other_org = make_org(OTHER_ORG)
        self.other_brand = make_brand(self.other_org, "Foreign")
        self.third_org = make_org(THIRD_ORG)
        self.third_site = SiteFactory(organization=self.third_org, base_url="https://third.example")

    @property
    def site(self) -> Site:
        return self.brand.base_site


@pytest.fixture
def tenants(sims) -> Tenants:
    return Tenants()


@pytest.fixture
def caller_token(bearer) -> str:
    return bearer(user_id=REQUESTER, org_ids=[CALLER_ORG])


def job_path(org_id, brand_id, job_id) -> str:
    return f"/v2/orgs/{org_id}/brands/{brand_id}/serenity/markets/generation/jobs/{job_id}"


class Api:
    """Calls the two endpoints the way the UI does."""

    def __init__(self, token: str, client: Client | None = None):
        self.token = token
        self.client = client or Client()

    def poll(self, org_id, brand_id, job_id, **headers):
        return self.client.get(job_path(org_id, brand_id, job_id), headers=self._headers(headers))

    def reauth(self, org_id, brand_id, job_id, *, audience: str | None = "semrush", **headers):
        if audience is not None:
            headers["x-promise-audience"] = audience
        return self.client.post(f"{job_path(org_id, brand_id, job_id)}/reauth", headers=self._headers(headers))

    def _headers(self, extra: dict) -> dict:
        return {"Authorization": f"Bearer {self.token}", **extra} if self.token else extra


@pytest.fixture
def api(caller_token) -> Api:
    return Api(caller_token)


@pytest.fixture
def ims(sims):
    """The IMS simulator's ledger and switches, clean for the test."""
    from sandbox.ims import controls, ledger

    controls.reset()
    ledger.clear()
    yield ledger
    controls.reset()
