"""Django admin for promise grants: which job holds a credential, for which client pair, until when.

Never the ciphertext (nor anything decrypted): the page lists only the fields below, and grants are
created, rotated and deleted by the job services alone.
"""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from tokens.models import PromiseGrant


@admin.register(PromiseGrant)
class PromiseGrantAdmin(admin.ModelAdmin[PromiseGrant]):
    list_display = ("job_id", "pair", "expires_at", "rotations", "updated_at")
    list_filter = ("pair",)
    search_fields = ("job_id",)
    ordering = ("-updated_at",)
    fields = ("job_id", "pair", "expires_at", "rotations", "created_at", "updated_at")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[PromiseGrant]:
        # The encrypted token is not even loaded: nothing on these pages can render it by mistake.
        return super().get_queryset(request).defer("ciphertext")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PromiseGrant | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: PromiseGrant | None = None) -> bool:
        return False
