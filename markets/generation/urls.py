"""Routes of generation-job polling and re-authorisation (SPEC §7), and of regeneration (SPEC §12).

The ids are captured as strings and validated by the views, so a malformed id answers 400 problem+json
instead of falling through to the router's 404.
"""

from django.urls import path

from markets.generation.apis import GenerationJobDetailApi, GenerationJobReauthApi, MarketRegenerateApi

JOB = "orgs/<str:orgId>/brands/<str:brandId>/serenity/markets/generation/jobs/<str:jobId>"
MARKET = "orgs/<str:orgId>/brands/<str:brandId>/serenity/markets/<str:marketId>"

urlpatterns = [
    path(JOB, GenerationJobDetailApi.as_view(), name="generation-job-detail"),
    path(f"{JOB}/reauth", GenerationJobReauthApi.as_view(), name="generation-job-reauth"),
    path(f"{MARKET}/generation", MarketRegenerateApi.as_view(), name="market-regenerate"),
]
