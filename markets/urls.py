"""Routes of the product API under /v2/. Dynamic parameters are classified in serenity/routes.py."""

from django.urls import include, path

urlpatterns = [
    path("", include("markets.onboarding.urls")),
    path("", include("markets.generation.urls")),
]
