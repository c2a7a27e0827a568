"""Routes of generation-job polling and re-authorisation (SPEC §7)."""
urlpatterns = []
