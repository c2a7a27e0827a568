"""Routes of generation-job polling and re-authorisation (SPEC §7).

The ids are captured as strings and validated by the views, so a malformed id answers 400 problem+json
instead of falling through to the router's 404.
"""
from django.urls import path

from markets.generation_apis import GenerationJobDetailApi, GenerationJobReauthApi

JOB = "orgs/<str:orgId>/brands/<str:brandId>/serenity/markets/generation/jobs/<str:jobId>"

urlpatterns = [
    path(JOB, GenerationJobDetailApi.as_view(), name="generation-job-detail"),
    path(f"{JOB}/reauth", GenerationJobReauthApi.as_view(), name="generation-job-reauth"),
]
