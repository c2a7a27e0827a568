"""Admin for the IMS simulator: a read-only ledger and token list (fingerprints only), and the switches.

The signing key is not registered: its private part has no business on a screen.
"""

from django.contrib import admin

from sandbox.ims.models import LedgerEvent, PromiseRecord, Switch


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(LedgerEvent)
class LedgerEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "kind", "operation", "fingerprint", "replaces", "pair", "user_id", "status", "reason"]
    list_filter = ["kind", "operation", "pair"]
    search_fields = ["fingerprint", "replaces", "user_id"]


@admin.register(PromiseRecord)
class PromiseRecordAdmin(ReadOnlyAdmin):
    # The digest is shown only as its fingerprint, the same name the ledger uses.
    list_display = ["fingerprint", "pair", "user_id", "state", "expires_at", "created_at", "ended_at"]
    list_filter = ["state", "pair"]
    fields = readonly_fields = (
        "fingerprint",
        "pair",
        "user_id",
        "org_ids",
        "state",
        "expires_at",
        "created_at",
        "ended_at",
    )


@admin.register(Switch)
class SwitchAdmin(admin.ModelAdmin):
    list_display = ["name", "remaining", "status", "mode", "stall_seconds", "delay_ms", "updated_at"]
    fields = ["name", "remaining", "status", "mode", "stall_seconds", "delay_ms"]
