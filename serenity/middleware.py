"""Middleware of our own: the request id (accept a sane X-Request-Id or mint one, expose it on the response and
in logs), django-cors-headers answering every API preflight the way the original service does, django-csp
choosing the policy by path, and the request's target as tracing reads it."""

import re
import uuid

from corsheaders.middleware import CorsMiddleware as LibraryCorsMiddleware
from csp.middleware import CSPMiddleware as LibraryCspMiddleware
from csp.utils import default_config
from django.conf import settings
from django.http import HttpResponse

from serenity import context

_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-Id", "")
        rid = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = rid
        token = context.request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            context.request_id.reset(token)
        response["X-Request-Id"] = rid
        return response


class RequestTargetMiddleware:
    """Gives the request its target as sent (`REQUEST_URI`, percent-encoded) when the server did not: gunicorn
    sets `RAW_URI`, Django's development and test servers set neither. OpenTelemetry's Django middleware, placed
    right after this one (serenity.tracing), otherwise rebuilds the URL from `PATH_INFO` as Latin-1, which raises
    on any path with a character outside it (`/v2/orgs/%E2%82%AC`): a 500 where every other path answers its 404."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.META.get("RAW_URI") is None and not request.META.get("REQUEST_URI"):
            request.META["REQUEST_URI"] = request.get_full_path()
        return self.get_response(request)


class CorsMiddleware(LibraryCorsMiddleware):
    """django-cors-headers (settings CORS_*), with one change: every OPTIONS request to the API is a preflight
    answered 204 with no body and no authentication, as the original service answers it (the library answers
    200, and only when Access-Control-Request-Method is sent)."""

    def check_preflight(self, request):
        request._cors_enabled = self.is_enabled(request)
        if request._cors_enabled and request.method == "OPTIONS":
            return HttpResponse(status=204)
        return None


class CspMiddleware(LibraryCspMiddleware):
    """django-csp, with two policies: CONTENT_SECURITY_POLICY (strict: the API answers data) everywhere, and
    CSP_PAGES_POLICY on the pages people open in a browser (CSP_PAGE_PATHS: the admin, the API docs, their
    static files), whose own scripts, styles and images must load."""

    def get_policy_parts(self, request, response, report_only=False):
        parts = super().get_policy_parts(request, response, report_only)
        if not report_only and parts.config is None and request.path.startswith(settings.CSP_PAGE_PATHS):
            parts.config = default_config(settings.CSP_PAGES_POLICY["DIRECTIVES"])
        return parts
