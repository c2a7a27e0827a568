"""factory-boy factories for organizations, brands, sites, markets and market-generation jobs."""

import factory

from markets import geo
from markets.generation.jobtype import MARKET_GENERATION_JOB_TYPE
from markets.models import Brand, Market, Organization, Site
from tests.jobs.factories import AsyncJobFactory


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    ims_org_id = factory.Sequence(lambda n: f"{n:024X}@AdobeOrg")
    name = factory.Sequence(lambda n: f"Org {n}")
    is_serenity_active = True


class BrandFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Brand
        skip_postgeneration_save = True

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Brand {n}")
    display_name = factory.LazyAttribute(lambda b: b.name)
    domain = factory.Sequence(lambda n: f"brand{n}.example")
    primary_url = factory.LazyAttribute(lambda b: f"https://{b.domain}")
    aliases = factory.LazyAttribute(lambda b: [b.name.split()[0]])
    status = Brand.Status.ACTIVE
    semrush_workspace_id = None

    @factory.post_generation
    def with_base_site(brand, create, extracted, **kwargs):
        if create and extracted is not False:
            brand.base_site = SiteFactory(organization=brand.organization, brand=brand, base_url=brand.primary_url)
            brand.save(update_fields=["base_site"])


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Site

    organization = factory.SubFactory(OrganizationFactory)
    base_url = factory.Sequence(lambda n: f"https://site{n}.example")


class MarketFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Market

    brand = factory.SubFactory(BrandFactory)
    country = "FR"
    language_code = "fr"
    geo_target_id = factory.LazyAttribute(lambda m: geo.geo_target_id(m.country))


class GenerationJobFactory(AsyncJobFactory):
    """A market-generation job as the producer leaves it: queued, no lease."""

    job_type = MARKET_GENERATION_JOB_TYPE
    phase = "queued"
