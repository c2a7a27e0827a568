"""Fixtures for onboarding and worker tests: an org + active brand with a Semrush workspace in the
simulator, an authenticated API client, and the async flag."""

from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from markets.clients.semrush import SemrushClient
from markets.models import Brand, Organization
from tests.markets.factories import BrandFactory, OrganizationFactory


@dataclass
class World:
    org: Organization
    brand: Brand
    user_id: str
    token: str
    client: APIClient

    def url(self, tail: str) -> str:
        return f"/v2/orgs/{self.org.id}/brands/{self.brand.id}/serenity/{tail}"

    @property
    def brand_fields(self) -> dict:
        """What the original's UI sends about the brand with every market: its domain and names."""
        return {"brandDomain": self.brand.domain, "brandNames": [self.brand.name]}

    def post(self, path: str, body: dict, **headers):
        return self.client.post(
            path, body, format="json", **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
        )


@pytest.fixture
def world(sims, bearer, queues):
    org = OrganizationFactory(ims_org_id="0A1B2C3D4E5F60718293A4B5@AdobeOrg")
    token = bearer(user_id="user-1", org_ids=[org.ims_org_id])
    workspace = SemrushClient(token).create_workspace(name="Nordlicht Outdoor", parent_id="serenity")
    brand = BrandFactory(
        organization=org,
        name="Nordlicht Outdoor",
        domain="nordlicht-outdoor.example",
        aliases=["Nordlicht", "Nordlicht Gear"],
        semrush_workspace_id=workspace,
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return World(org=org, brand=brand, user_id="user-1", token=token, client=client)


@pytest.fixture
def async_on(settings):
    settings.SERENITY_ASYNC_PROMPT_GEN = "TRUE"  # any case turns it on


@pytest.fixture
def gate(moto_server):
    """Set the SSM readiness parameter for a test; restored to `true` afterwards."""
    from django.conf import settings

    from jobs import readiness
    from jobs.clients import ssm

    def set_value(value: str | None):
        if value is None:
            ssm.client().delete_parameter(Name=settings.READINESS_PARAMETER)
        else:
            readiness.readiness_set(value)
        readiness.reset_cache()

    yield set_value
    set_value("true")
