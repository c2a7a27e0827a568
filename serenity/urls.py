"""Root URL configuration. Every dynamic path parameter is classified in serenity/routes.py."""
from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.authentication import SessionAuthentication

from serenity import health
from serenity.openapi import ApiDocsAccess

DOCS_ACCESS = {"authentication_classes": [SessionAuthentication], "permission_classes": [ApiDocsAccess]}

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("v2/", include("markets.urls")),
    path("admin/", admin.site.urls),
    path("api/schema", SpectacularAPIView.as_view(**DOCS_ACCESS), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: the pages' policy allows no inline script.
    path("api/docs", SpectacularSwaggerSplitView.as_view(url_name="schema", **DOCS_ACCESS), name="swagger-ui"),
]
if settings.SANDBOX_ENABLED:
    urlpatterns.append(path("sandbox/", include("serenity.sandbox.urls")))

handler400 = "serenity.problems.handler400"
handler403 = "serenity.problems.handler403"
handler404 = "serenity.problems.handler404"
handler500 = "serenity.problems.handler500"
