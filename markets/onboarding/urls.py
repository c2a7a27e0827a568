"""Routes of the onboarding entry points (SPEC §3) and of the market journey around them (§3.1). Dynamic parameters
are classified in serenity/routes.py.

The ids are captured as strings and checked by the views, so a malformed id answers 400, as the original's
router does, instead of falling through to a 404. A market's slice (`…/markets/{geoTargetId}/{languageCode}`)
has the shape of regeneration's `…/markets/{marketId}/generation`: markets/urls.py puts the generation routes
first, so that one is never read as a slice."""

from django.urls import path

from markets.onboarding import apis

BRAND = "orgs/<str:orgId>/brands/<str:brandId>/serenity"

urlpatterns = [
    path("orgs/<str:orgId>/brands", apis.BrandCreateApi.as_view(), name="brand-create"),
    path(f"{BRAND}/markets", apis.MarketsApi.as_view(), name="markets"),
    path(f"{BRAND}/markets/<str:geoTargetId>/<str:languageCode>", apis.MarketSliceApi.as_view(), name="market-slice"),
    path("orgs/<str:orgId>/serenity/languages", apis.LanguagesApi.as_view(), name="languages"),
    path("orgs/<str:orgId>/serenity/models", apis.ModelsApi.as_view(), name="models"),
    path(
        "orgs/<str:orgId>/brands/<str:brandId>/serenity/activate",
        apis.BrandActivateApi.as_view(),
        name="brand-activate",
    ),
]
