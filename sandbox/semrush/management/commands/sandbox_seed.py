"""`manage.py sandbox_seed`: a demo organization, brand, base site and Semrush workspace for local runs."""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from markets.models import Brand, Organization, Site
from sandbox.ims.keys import issue_user_token
from sandbox.ims.sessions import issue_session_token
from sandbox.semrush import catalogue, services
from sandbox.semrush.models import CatalogueOverride

IMS_ORG_ID = "SANDBOX0000000000000000@AdobeOrg"
ORG_NAME = "Sandbox Demo"
USER_ID = "SANDBOXUSER0000000000000@AdobeID"
BRAND_NAME = "Sandbox Coffee"
DOMAIN = "sandbox-coffee.example"
PRIMARY_URL = "https://www.sandbox-coffee.example/"
ALIASES = ["Sandbox Coffee Co", "SandboxCoffee"]
# Catalogues written down for the demo brand (editable in the admin); other countries are generated.
CATALOGUE_COUNTRIES = ("US", "FR", "DE")


class Command(BaseCommand):
    help = (
        "Run once after `migrate` on a local database (safe to run again: same ids): creates the demo "
        "organization, active brand, base site and the brand's Semrush sub-workspace and catalogue in the "
        "simulator, and prints one JSON object {orgId, imsOrgId, brandId, brandName, brandDomain, siteId, userId, "
        "token, sessionToken}: `token` is a fresh IMS user bearer and `sessionToken` a fresh SpaceCat session token "
        "of the demo user for that organization."
    )

    def add_arguments(self, parser):
        parser.add_argument("--ttl", type=int, default=3600, help="Lifetime of the printed bearer, in seconds.")

    def handle(self, *args, ttl: int, **options):
        if ttl <= 0:
            raise CommandError("--ttl must be a positive number of seconds")
        with transaction.atomic():
            org, _ = Organization.objects.update_or_create(
                ims_org_id=IMS_ORG_ID, defaults={"name": ORG_NAME, "is_serenity_active": True}
            )
            brand, _ = Brand.objects.get_or_create(
                organization=org,
                domain=DOMAIN,
                defaults={
                    "name": BRAND_NAME,
                    "display_name": BRAND_NAME,
                    "aliases": ALIASES,
                    "primary_url": PRIMARY_URL,
                    "status": Brand.Status.ACTIVE,
                },
            )
            site = brand.base_site or Site.objects.create(organization=org, brand=brand, base_url=PRIMARY_URL)
            # Recreated under the same id when the simulator's data was reset since the last run.
            workspace = services.workspace_create(
                name=BRAND_NAME,
                parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID,
                workspace_id=brand.semrush_workspace_id,
            )
            brand.base_site = site
            brand.semrush_workspace_id = workspace.id
            brand.status = Brand.Status.ACTIVE
            brand.save(update_fields=["base_site", "semrush_workspace_id", "status", "updated_at"])
            for country in CATALOGUE_COUNTRIES:
                # get_or_create: a catalogue edited in the admin survives a second run.
                CatalogueOverride.objects.get_or_create(
                    domain=DOMAIN, country=country, defaults={"items": catalogue.generate(DOMAIN, country)}
                )
        token = issue_user_token(user_id=USER_ID, org_ids=[IMS_ORG_ID], ttl=ttl)
        self.stdout.write(
            json.dumps(
                {
                    "orgId": str(org.id),
                    "imsOrgId": IMS_ORG_ID,
                    "brandId": str(brand.id),
                    "brandName": brand.name,
                    "brandDomain": brand.domain,
                    "siteId": str(site.id),
                    "userId": USER_ID,
                    "token": token,
                    "sessionToken": issue_session_token(user_id=USER_ID, org_ids=[IMS_ORG_ID], ttl=ttl),
                }
            )
        )
