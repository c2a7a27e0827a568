"""Routes of the onboarding entry points (SPEC §3). Dynamic parameters are classified in serenity/routes.py.

The ids are captured as strings and checked by the views, so a malformed id answers 400, as the original's
router does, instead of falling through to a 404."""

from django.urls import path

from markets.onboarding import apis

urlpatterns = [
    path("orgs/<str:orgId>/brands", apis.BrandCreateApi.as_view(), name="brand-create"),
    path(
        "orgs/<str:orgId>/brands/<str:brandId>/serenity/markets", apis.MarketCreateApi.as_view(), name="market-create"
    ),
    path(
        "orgs/<str:orgId>/brands/<str:brandId>/serenity/activate",
        apis.BrandActivateApi.as_view(),
        name="brand-activate",
    ),
]
