"""Routes of the onboarding entry points (SPEC §3)."""
from django.urls import path

from markets import apis

urlpatterns = [
    path("orgs/<uuid:orgId>/brands", apis.BrandCreateApi.as_view(), name="brand-create"),
    path("orgs/<uuid:orgId>/brands/<uuid:brandId>/serenity/markets", apis.MarketCreateApi.as_view(),
         name="market-create"),
    path("orgs/<uuid:orgId>/brands/<uuid:brandId>/serenity/activate", apis.BrandActivateApi.as_view(),
         name="brand-activate"),
]
