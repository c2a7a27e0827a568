"""Admin pages of the DRS simulator: switches editable, the call ledger read-only."""

from django.contrib import admin

from sandbox.drs.models import DrsCall, DrsSwitch


@admin.register(DrsSwitch)
class DrsSwitchAdmin(admin.ModelAdmin):
    list_display = ("kind", "brand", "latency_ms", "remaining", "created_at")
    list_filter = ("kind",)
    search_fields = ("brand",)


@admin.register(DrsCall)
class DrsCallAdmin(admin.ModelAdmin):
    list_display = ("id", "received_at", "brand", "outcome", "function")
    list_filter = ("outcome",)
    search_fields = ("brand",)
    readonly_fields = ("received_at", "brand", "function", "body", "outcome")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
