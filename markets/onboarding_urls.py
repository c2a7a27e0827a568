"""Routes of the onboarding entry points (SPEC §3)."""
urlpatterns = []
