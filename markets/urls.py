"""Routes of the product API under /v2/. Dynamic parameters are classified in serenity/routes.py.

The generation routes come first: `…/markets/{marketId}/generation` would otherwise be read as a market's slice
(`…/markets/{geoTargetId}/{languageCode}`)."""

from django.urls import include, path

urlpatterns = [
    path("", include("markets.generation.urls")),
    path("", include("markets.onboarding.urls")),
]
