"""Admin pages of the Semrush simulator: what it holds, read at a glance (it never stores a token)."""

from django.contrib import admin

from sandbox.semrush import models


@admin.register(models.Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "parent_id", "created_at")
    search_fields = ("id", "name", "parent_id")


@admin.register(models.Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "workspace", "geo_target_id", "language_code", "status", "published_at")
    list_filter = ("status", "language_code")
    search_fields = ("id", "name", "workspace__id")


class TagValueInline(admin.TabularInline):
    model = models.TagValue
    extra = 0


@admin.register(models.TagRoot)
class TagRootAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "workspace")
    search_fields = ("id", "name", "workspace__id")
    inlines = [TagValueInline]


@admin.register(models.TagValue)
class TagValueAdmin(admin.ModelAdmin):
    list_display = ("id", "root", "value")
    search_fields = ("id", "value", "root__name")


@admin.register(models.Prompt)
class PromptAdmin(admin.ModelAdmin):
    list_display = ("prompt_id", "project", "text", "created_by", "created_at")
    list_filter = ("project__language_code",)
    search_fields = ("prompt_id", "text", "project__id")


@admin.register(models.IdempotentResponse)
class IdempotentResponseAdmin(admin.ModelAdmin):
    list_display = ("method", "path", "key", "status", "created_at")
    readonly_fields = ("method", "path", "key", "status", "body", "created_at")


@admin.register(models.CatalogueOverride)
class CatalogueOverrideAdmin(admin.ModelAdmin):
    list_display = ("domain", "country", "updated_at")
    search_fields = ("domain",)


@admin.register(models.Switchboard)
class SwitchboardAdmin(admin.ModelAdmin):
    list_display = ("id", "latency_ms")


@admin.register(models.FailureRule)
class FailureRuleAdmin(admin.ModelAdmin):
    list_display = ("id", "status", "remaining", "method", "path_contains", "retry_after", "created_at")


@admin.register(models.Call)
class CallAdmin(admin.ModelAdmin):
    list_display = ("seq", "method", "path", "status", "user_id", "at")
    list_filter = ("method", "status")
    readonly_fields = ("method", "path", "query", "status", "user_id", "at")
