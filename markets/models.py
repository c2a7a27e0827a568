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
    name = models.CharField(max_length=200)
    display_name = models.CharField(max_length=200, blank=True)
    aliases = models.JSONField(default=list, blank=True)
    domain = models.CharField(max_length=253)
    primary_url = models.URLField(max_length=2000, blank=True)
    semrush_workspace_id = models.CharField(max_length=100, null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    base_site = models.OneToOneField(
        "Site", null=True, blank=True, on_delete=models.SET_NULL, related_name="base_of_brand"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "domain"], name="brand_unique_domain_per_org"),
            models.CheckConstraint(condition=models.Q(status__in=["pending", "active"]), name="brand_status_valid"),
        ]

    def __str__(self):
        return self.display_name or self.name


class Site(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="sites")
    brand = models.ForeignKey(Brand, null=True, blank=True, on_delete=models.SET_NULL, related_name="sites")
    base_url = models.URLField(max_length=2000)
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
    language_code = models.CharField(max_length=8, help_text="ISO 639-1, lower case")
    geo_target_id = models.PositiveIntegerField(help_text="2000 + ISO 3166-1 numeric")
    semrush_project_id = models.CharField(max_length=100, null=True, blank=True)
    publish_state = models.CharField(max_length=16, choices=PublishState.choices, default=PublishState.UNPUBLISHED)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["brand", "geo_target_id", "language_code"], name="market_unique_slice_per_brand"
            ),
            models.CheckConstraint(condition=models.Q(country__regex=r"^[A-Z]{2}$"), name="market_country_alpha2"),
            models.CheckConstraint(condition=models.Q(language_code__regex=r"^[a-z]{2}$"), name="market_language_code"),
            models.CheckConstraint(
                condition=models.Q(geo_target_id__gte=2000, geo_target_id__lt=3000), name="market_geo_target_country"
            ),
        ]

    def __str__(self):
        return f"{self.country}/{self.language_code}"
