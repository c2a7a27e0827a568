"""Organizations, brands, sites and markets: fields and constraints only (workflows live in services)."""

import uuid

from django.db import models


class Organization(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    ims_org_id = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    is_serenity_active = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.name} ({self.ims_org_id})"


class Brand(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        ACTIVE = "active"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="brands")
    name = models.TextField()
    display_name = models.TextField(blank=True)
    aliases = models.JSONField(default=list, blank=True)
    domain = models.TextField(blank=True, help_text="Host of the brand's first URL")
    primary_url = models.TextField(blank=True)
    urls = models.JSONField(default=list, blank=True, help_text="The brand's URLs, as given")
    semrush_model_ids = models.JSONField(default=list, blank=True, help_text="AI models its projects track")
    # Fields the original service's brand carries that this service keeps and returns but does not act on
    # (description, competitors, social accounts, ...): docs/api.md lists them.
    profile = models.JSONField(default=dict, blank=True)
    semrush_workspace_id = models.CharField(max_length=100, null=True, blank=True)
    workspace_provisioned_at = models.DateTimeField(null=True, blank=True, help_text="When Serenity was activated")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    updated_by = models.CharField(max_length=255, blank=True, help_text="User id of the last create or update")
    base_site = models.OneToOneField(
        "Site", null=True, blank=True, on_delete=models.SET_NULL, related_name="base_of_brand"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # A brand is found again by its name (createBrand is an upsert, as in the original service).
            models.UniqueConstraint(fields=["organization", "name"], name="brand_unique_name_per_org"),
            # A site is the primary URL of one brand only.
            models.UniqueConstraint(
                fields=["organization", "domain"], condition=~models.Q(domain=""), name="brand_unique_domain_per_org"
            ),
            models.CheckConstraint(condition=models.Q(status__in=["pending", "active"]), name="brand_status_valid"),
        ]

    def __str__(self):
        return self.display_name or self.name


class Site(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="sites")
    brand = models.ForeignKey(Brand, null=True, blank=True, on_delete=models.SET_NULL, related_name="sites")
    base_url = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.base_url


class Market(models.Model):
    class PublishState(models.TextChoices):
        UNPUBLISHED = "unpublished"
        PUBLISHED = "published"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="markets")
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.SET_NULL, related_name="markets")
    country = models.CharField(max_length=2, help_text="ISO 3166-1 alpha-2, upper case")
    language_code = models.CharField(max_length=12, help_text="BCP-47 tag, lower case, e.g. fr or de-ch")
    geo_target_id = models.PositiveIntegerField(help_text="2000 + ISO 3166-1 numeric")
    name = models.TextField(blank=True, help_text="Semrush project name")
    domain = models.TextField(blank=True, help_text="The domain this market tracks")
    brand_names = models.JSONField(default=list, blank=True, help_text="The brand's names in this market")
    brand_display_name = models.TextField(blank=True)
    model_ids = models.JSONField(default=list, blank=True, help_text="AI models the project tracks")
    semrush_project_id = models.CharField(max_length=100, null=True, blank=True)
    publish_state = models.CharField(max_length=16, choices=PublishState.choices, default=PublishState.UNPUBLISHED)
    # The fence between the market's generation and its deletion (markets/generation/fence.py). A delete under way
    # holds the market until `deletion_hold_expires_at`: no generation write passes the fence meanwhile, and a second
    # delete waits for the first. The Semrush write a generation has in flight is recorded by the lease of the
    # delivery sending it, until its call gives up: the delete waits for it before it deletes the Semrush project.
    deletion_hold = models.UUIDField(null=True, blank=True)
    deletion_hold_expires_at = models.DateTimeField(null=True, blank=True)
    generation_write_lease = models.UUIDField(null=True, blank=True)
    generation_write_until = models.DateTimeField(null=True, blank=True)
    # Why the generation its entry point asked for could not be enqueued (markets/generation/producer.py, a
    # `NotEnqueued` code), and when; cleared once a job is enqueued for it. The doctor lists such markets.
    generation_not_enqueued = models.CharField(max_length=32, null=True, blank=True)
    generation_not_enqueued_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["brand", "geo_target_id", "language_code"], name="market_unique_slice_per_brand"
            ),
            models.CheckConstraint(
                condition=models.Q(deletion_hold__isnull=True) | models.Q(deletion_hold_expires_at__isnull=False),
                name="market_deletion_hold_expires",
            ),
            models.CheckConstraint(
                condition=models.Q(generation_write_lease__isnull=True)
                | models.Q(generation_write_until__isnull=False),
                name="market_generation_write_ends",
            ),
            models.CheckConstraint(condition=models.Q(country__regex=r"^[A-Z]{2}$"), name="market_country_alpha2"),
            models.CheckConstraint(
                condition=models.Q(language_code__regex=r"^[a-z]{2,3}(-[a-z]{2,4})?$"), name="market_language_tag"
            ),
            models.CheckConstraint(
                condition=models.Q(geo_target_id__gte=2000, geo_target_id__lt=3000), name="market_geo_target_country"
            ),
        ]

    def __str__(self):
        return f"{self.country}/{self.language_code}"


class SemrushRateBudget(models.Model):
    """The fleet's Semrush request-rate budget for one client pair (SEMRUSH_MAX_CALLS_PER_SECOND): every worker
    process takes its next call's slot from this row, in one conditional UPDATE (markets/clients/semrush_budget.py).
    Times are microseconds since the epoch on the database's clock, the one clock every process shares."""

    pair = models.CharField(max_length=32, primary_key=True, help_text="Name of the IMS client pair the calls carry")
    next_slot_us = models.BigIntegerField(default=0, help_text="The earliest time the next call may be sent")
    paused_until_us = models.BigIntegerField(default=0, help_text="No call before this: Semrush answered 429")

    class Meta:
        db_table = "semrush_rate_budgets"

    def __str__(self):
        return f"Semrush rate budget of {self.pair}"
