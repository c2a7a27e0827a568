"""Root URL configuration. Every dynamic path parameter is classified in serenity/routes.py."""

from django.conf import settings
from django.contrib import admin
from django.http import HttpResponse
from django.urls import include, path
from django.views.decorators.http import require_GET
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.authentication import SessionAuthentication

from serenity import health
from serenity.openapi import ApiDocsAccess

DOCS_ACCESS = {"authentication_classes": [SessionAuthentication], "permission_classes": [ApiDocsAccess]}


@require_GET
def no_favicon(request):
    """Browsers ask every page's host for /favicon.ico: the service has none and says so without an error (a 404
    is an error in the console of every admin page)."""
    response = HttpResponse(status=204)
    response["Cache-Control"] = "public, max-age=86400"
    return response


urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("favicon.ico", no_favicon, name="favicon"),
    path("v2/", include("markets.urls")),
    path("admin/", admin.site.urls),
    path("api/schema", SpectacularAPIView.as_view(**DOCS_ACCESS), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: the pages' policy allows no inline script.
    path("api/docs", SpectacularSwaggerSplitView.as_view(url_name="schema", **DOCS_ACCESS), name="swagger-ui"),
]
if settings.SANDBOX_ENABLED:
    urlpatterns.append(path("sandbox/", include("sandbox.urls")))

handler400 = "serenity.problems.handler400"
handler403 = "serenity.problems.handler403"
handler404 = "serenity.problems.handler404"
handler500 = "serenity.problems.handler500"
