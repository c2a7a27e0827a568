"""Django admin for organizations, brands, sites and markets: browsable and read-only (onboarding
services own every write), with links from a brand to its generation jobs; and the job list's market
columns and filter (the job admin itself knows nothing of markets)."""

from django.contrib import admin
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.html import format_html

from jobs.admin import AsyncJobAdmin
from jobs.models import AsyncJob
from markets.models import Brand, Market, Organization, Site
from serenity.logging import redact


def market_label(params) -> str:
    """`FR/fr` from a generation job's parameters, or an empty string when it names no market."""
    params = params or {}
    return "/".join(str(p) for p in (params.get("market"), params.get("languageCode")) if p)


def brand_label(params) -> str:
    brand = (params or {}).get("brand")
    return redact(str(brand)) if brand else ""


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
    list_display = ("__str__", "brand", "geo_target_id", "semrush_project_id", "publish_state", "created_at", "jobs")
    list_filter = ("publish_state", "country", "language_code")
    search_fields = ("brand__name", "brand__id", "id", "semrush_project_id")
    list_select_related = ("brand",)

    @admin.display(description="generation jobs")
    def jobs(self, market):
        return jobs_link(market.brand_id)


class MarketFilter(admin.SimpleListFilter):
    title = "market"
    parameter_name = "market"

    def lookups(self, request, model_admin):
        values = AsyncJob.objects.values_list("params__market", "params__languageCode").distinct()
        labels = sorted({market_label({"market": m, "languageCode": lang}) for m, lang in values} - {""})
        return [(label, label) for label in labels]

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        market, _, language = value.partition("/")
        filters = Q(params__market=market)
        if language:
            filters &= Q(params__languageCode=language)
        return queryset.filter(filters)


class MarketJobAdmin(AsyncJobAdmin):
    """The job admin with the brand and market of each generation job."""

    list_display = (*AsyncJobAdmin.list_display, "brand", "market")
    list_filter = (*AsyncJobAdmin.list_filter, MarketFilter)

    @admin.display(description="brand")
    def brand(self, job):
        return brand_label(job.params) or (str(job.brand_id) if job.brand_id else "-")

    @admin.display(description="market")
    def market(self, job):
        return market_label(job.params) or "-"


admin.site.unregister(AsyncJob)
admin.site.register(AsyncJob, MarketJobAdmin)
