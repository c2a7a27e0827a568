"""Django admin for organizations, brands, sites and markets: browsable and read-only (onboarding
services own every write), with links from a brand to its generation jobs."""
from django.contrib import admin
from django.db import models
from django.urls import reverse
from django.utils.html import format_html

from markets.models import Brand, Market, Organization, Site


class ReadOnlyAdmin(admin.ModelAdmin):
    # The read-only pages still build a form; say which scheme a bare URL would get (Django 6's default).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def jobs_link(brand_id, label="jobs"):
    url = reverse("admin:jobs_asyncjob_changelist")
    return format_html('<a href="{}?brand_id={}">{}</a>', url, brand_id, label)


class MarketInline(admin.TabularInline):
    model = Market
    fields = ("country", "language_code", "geo_target_id", "semrush_project_id", "publish_state", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Organization)
class OrganizationAdmin(ReadOnlyAdmin):
    list_display = ("name", "ims_org_id", "is_serenity_active", "created_at")
    list_filter = ("is_serenity_active",)
    search_fields = ("name", "ims_org_id", "id")


@admin.register(Brand)
class BrandAdmin(ReadOnlyAdmin):
    list_display = ("name", "display_name", "domain", "status", "organization", "semrush_workspace_id", "jobs")
    list_filter = ("status", "organization")
    search_fields = ("name", "display_name", "domain", "id", "semrush_workspace_id")
    list_select_related = ("organization",)
    inlines = [MarketInline]

    @admin.display(description="generation jobs")
    def jobs(self, brand):
        return jobs_link(brand.id)


@admin.register(Site)
class SiteAdmin(ReadOnlyAdmin):
    list_display = ("base_url", "organization", "brand", "created_at")
    search_fields = ("base_url", "id")
    list_select_related = ("organization", "brand")


@admin.register(Market)
class MarketAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "brand", "geo_target_id", "semrush_project_id", "publish_state", "created_at",
                    "jobs")
    list_filter = ("publish_state", "country", "language_code")
    search_fields = ("brand__name", "brand__id", "id", "semrush_project_id")
    list_select_related = ("brand",)

    @admin.display(description="generation jobs")
    def jobs(self, market):
        return jobs_link(market.brand_id)
