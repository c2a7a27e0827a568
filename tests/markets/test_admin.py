"""The organization, brand, site and market admin: browsable, read-only, and linked to a brand's jobs."""

import pytest
from django.urls import reverse

from tests.jobs.conftest import waiting
from tests.markets.factories import BrandFactory, MarketFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def market():
    return MarketFactory(brand=BrandFactory(name="Acme"), semrush_project_id="proj-1")


@pytest.mark.parametrize("model", ["organization", "brand", "site", "market"])
def test_each_list_and_detail_page_renders_read_only(admin_client, market, model):
    obj = {
        "organization": market.brand.organization,
        "brand": market.brand,
        "site": market.brand.base_site,
        "market": market,
    }[model]

    listing = admin_client.get(reverse(f"admin:markets_{model}_changelist"))
    page = admin_client.get(reverse(f"admin:markets_{model}_change", args=[obj.pk]))

    assert listing.status_code == 200 and page.status_code == 200
    assert [o.pk for o in listing.context["cl"].result_list] == [obj.pk]
    assert 'name="_save"' not in page.content.decode()
    assert admin_client.get(reverse(f"admin:markets_{model}_add")).status_code == 403


def test_a_brand_lists_its_markets_and_links_to_its_generation_jobs(admin_client, market):
    job = waiting(brand_id=market.brand.id)
    waiting()

    page = admin_client.get(reverse("admin:markets_brand_change", args=[market.brand.pk])).content.decode()
    listing = admin_client.get(reverse("admin:markets_brand_changelist")).content.decode()

    assert "proj-1" in page
    link = f"{reverse('admin:jobs_asyncjob_changelist')}?brand_id={market.brand.id}"
    assert f'href="{link}"' in listing
    jobs = admin_client.get(link)
    assert jobs.status_code == 200
    assert [j.id for j in jobs.context["cl"].result_list] == [job.id]  # not `other`, of another brand


def test_brands_are_found_by_name_and_domain(admin_client, market):
    url = reverse("admin:markets_brand_changelist")
    assert [b.pk for b in admin_client.get(url, {"q": "Acme"}).context["cl"].result_list] == [market.brand.pk]
    assert [b.pk for b in admin_client.get(url, {"q": market.brand.domain}).context["cl"].result_list] == [
        market.brand.pk
    ]
