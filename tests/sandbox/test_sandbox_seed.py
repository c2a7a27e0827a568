"""`manage.py sandbox_seed`: the demo organization, brand, site and Semrush workspace, idempotently."""

import io
import json

import pytest
from django.conf import settings
from django.core.management import call_command

from markets.clients.semrush import SemrushClient
from markets.models import Brand, Organization, Site
from sandbox.ims import keys
from sandbox.semrush import controls, state
from sandbox.semrush.models import CatalogueOverride


def seed(*args) -> tuple[dict, str]:
    out = io.StringIO()
    call_command("sandbox_seed", *args, stdout=out)
    return json.loads(out.getvalue()), out.getvalue()


@pytest.mark.django_db
def test_sandbox_seed_prints_one_json_object_naming_what_it_created():
    printed, raw = seed()

    org = Organization.objects.get()
    brand = Brand.objects.get()
    site = Site.objects.get()
    assert raw.count("\n") == 1
    assert printed == {
        "orgId": str(org.id),
        "imsOrgId": "SANDBOX0000000000000000@AdobeOrg",
        "brandId": str(brand.id),
        "brandName": "Sandbox Coffee",
        "brandDomain": "sandbox-coffee.example",
        "siteId": str(site.id),
        "userId": "SANDBOXUSER0000000000000@AdobeID",
        "token": printed["token"],
        "sessionToken": printed["sessionToken"],
    }
    assert (org.ims_org_id, org.is_serenity_active) == ("SANDBOX0000000000000000@AdobeOrg", True)
    assert (
        brand.organization_id,
        brand.status,
        brand.domain,
        brand.primary_url,
        brand.aliases,
        brand.base_site_id,
    ) == (
        org.id,
        "active",
        "sandbox-coffee.example",
        "https://www.sandbox-coffee.example/",
        ["Sandbox Coffee Co", "SandboxCoffee"],
        site.id,
    )
    assert (site.organization_id, site.brand_id, site.base_url) == (org.id, brand.id, brand.primary_url)


@pytest.mark.django_db
def test_sandbox_seed_token_is_a_user_bearer_for_the_demo_organization():
    printed, _ = seed()

    claims = keys.verify_token(printed["token"], audience=settings.IMS_AUDIENCE[0])

    assert (claims["user_id"], claims["org_ids"]) == (printed["userId"], [printed["imsOrgId"]])


@pytest.mark.django_db
def test_sandbox_seed_creates_the_brand_workspace_and_catalogue_in_the_simulator():
    seed()

    brand = Brand.objects.get()
    assert [(w["id"], w["name"]) for w in state.workspaces(parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID)] == [
        (brand.semrush_workspace_id, "Sandbox Coffee")
    ]
    assert sorted(CatalogueOverride.objects.values_list("country", flat=True)) == ["DE", "FR", "US"]


@pytest.mark.django_db
def test_running_sandbox_seed_twice_yields_the_same_ids():
    first, _ = seed()
    second, _ = seed()

    fresh = ("token", "sessionToken")
    assert {k: v for k, v in first.items() if k not in fresh} == {k: v for k, v in second.items() if k not in fresh}
    assert (Organization.objects.count(), Brand.objects.count(), Site.objects.count()) == (1, 1, 1)
    assert len(state.workspaces(parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID)) == 1
    assert CatalogueOverride.objects.count() == 3


@pytest.mark.django_db
def test_sandbox_seed_recreates_the_workspace_the_simulator_forgot_under_the_same_id():
    seed()
    workspace_id = Brand.objects.get().semrush_workspace_id
    controls.reset(data=True)

    seed()

    assert Brand.objects.get().semrush_workspace_id == workspace_id
    assert [w["id"] for w in state.workspaces(parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID)] == [workspace_id]


def test_the_seeded_token_reads_the_seeded_catalogue_over_http(sims):
    printed, _ = seed()
    brand = Brand.objects.get(id=printed["brandId"])

    items = SemrushClient(printed["token"]).brand_topics(
        workspace_id=brand.semrush_workspace_id, domain=brand.domain, country="FR"
    )

    assert items == CatalogueOverride.objects.get(domain=brand.domain, country="FR").items
    assert items != []
