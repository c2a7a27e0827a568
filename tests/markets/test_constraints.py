"""Database constraints behind the domain model (SPEC §2)."""

import uuid

import pytest
from django.db import DataError, IntegrityError, transaction

from markets.models import Market
from tests.jobs.factories import AsyncJobFactory
from tests.markets.factories import BrandFactory, MarketFactory


@pytest.fixture
def brand(db):
    return BrandFactory(name="Acme", domain="acme.example", with_base_site=False)


def test_the_database_rejects_a_second_market_for_the_same_slice(brand):
    MarketFactory(brand=brand, country="FR", language_code="fr", geo_target_id=2250)
    with pytest.raises(IntegrityError), transaction.atomic():
        MarketFactory(brand=brand, country="FR", language_code="fr", geo_target_id=2250)
    assert Market.objects.filter(brand=brand).count() == 1


def test_the_same_country_in_another_language_is_another_market(brand):
    MarketFactory(brand=brand, country="CH", language_code="de", geo_target_id=2756)
    MarketFactory(brand=brand, country="CH", language_code="fr", geo_target_id=2756)
    assert Market.objects.filter(brand=brand).count() == 2


@pytest.mark.parametrize(
    ("country", "language"), [("fr", "fr"), ("FRA", "fr"), ("FR", "FR"), ("FR", "f"), ("FR", "fr_fr"), ("FR", "fr-CH")]
)
def test_the_database_rejects_malformed_country_and_language_codes(brand, country, language):
    # A check constraint (IntegrityError), or the column width itself (DataError) for 3-letter values.
    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        MarketFactory(brand=brand, country=country, language_code=language, geo_target_id=2250)


def test_the_database_rejects_an_unknown_job_status(db):
    with pytest.raises(IntegrityError), transaction.atomic():
        AsyncJobFactory(job_type="t", status="RUNNING", organization_id=uuid.uuid4())


def test_the_database_rejects_a_lease_on_a_finished_job(db):
    from django.utils import timezone

    with pytest.raises(IntegrityError), transaction.atomic():
        AsyncJobFactory(
            job_type="t",
            status="COMPLETED",
            organization_id=uuid.uuid4(),
            lease_token=uuid.uuid4(),
            lease_expires_at=timezone.now(),
        )


def test_a_brand_domain_is_unique_within_an_organization(brand):
    with pytest.raises(IntegrityError), transaction.atomic():
        BrandFactory(with_base_site=False, organization=brand.organization, name="Other", domain="acme.example")


def test_a_brand_name_is_unique_within_an_organization_and_many_brands_may_have_no_domain(brand):
    BrandFactory(with_base_site=False, organization=brand.organization, name="No URL 1", domain="")
    BrandFactory(with_base_site=False, organization=brand.organization, name="No URL 2", domain="")
    with pytest.raises(IntegrityError), transaction.atomic():
        BrandFactory(with_base_site=False, organization=brand.organization, name="Acme", domain="acme2.example")
