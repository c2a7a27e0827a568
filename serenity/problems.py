"""RFC 9457 problem details: the one error shape of the API, and the exception handler that builds it.

A `DomainError` declares `status`, `code` and `title` as class attributes (like DRF's APIException).
The handler builds on DRF's own, so `WWW-Authenticate`, `Retry-After` and the transaction rollback are
kept; anything it does not know stays an ordinary logged 500 with a body that leaks nothing.

Every problem document also carries the original service's error envelope, which the UI was written
against: `error` (its stable token, from ORIGINAL_ERROR_TOKENS) and `message` (a sanitised sentence), and a
403 or 404 carries the `x-error` header with that message, as the original's do.
"""

import logging
import re

from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework import status as http
from rest_framework.views import exception_handler as drf_exception_handler

log = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "https://errors.serenity.example/"
ERROR_HEADER = "x-error"
# Statuses whose answers carry the x-error header (the original's forbidden() and notFound() helpers set it).
ERROR_HEADER_STATUSES = (403, 404)
MAX_MESSAGE_LENGTH = 500

# Our stable codes -> the original service's `error` token for the same case. The UI branches on these
# (`error === "sliceExists"`); our `code` stays as it was for clients written against this service.
ORIGINAL_ERROR_TOKENS: dict[str, str] = {
    # 400: the request itself
    "invalid": "invalidRequest",
    "bad_request": "invalidRequest",
    "malformed_request": "invalidRequest",
    "unsupported_media_type": "invalidRequest",
    "invalid_promise_audience": "invalidRequest",
    "PROMISE_PAIR_REQUIRED": "invalidRequest",
    "unknown_market": "unknownMarket",
    "unknown_language": "unknownLanguage",
    # 401: who is calling
    "not_authenticated": "authenticationRequired",
    "authentication_failed": "authenticationRequired",
    "invalid_promise_token": "invalidRequest",
    "promise_token_rejected": "authenticationRequired",
    "PROMISE_TOKEN_REQUIRED": "promiseTokenRequired",
    "semrush_authentication_failed": "authenticationRequired",
    # 403: what the caller may do
    "forbidden": "forbidden",
    "organization_access_denied": "forbidden",
    "not_job_requester": "forbidden",
    "serenity_not_active": "forbidden",
    "semrush_forbidden": "forbidden",
    # 404: what exists for this caller
    "not_found": "notFound",
    "organization_not_found": "notFound",
    "brand_not_found": "notFound",
    "job_not_found": "notFound",
    "market_not_found": "notFound",
    "market_slice_not_found": "marketNotFound",
    "site_not_found": "notFound",
    "serenity_not_active_for_brand": "notFound",
    # 409: state
    "conflict": "conflict",
    "market_exists": "sliceExists",
    "brand_exists": "conflict",
    "brand_status_demotion_not_allowed": "conflict",
    "brand_not_active": "invalidState",
    "job_not_awaiting_reauth": "invalidState",
    "prompt_generation_disabled": "invalidState",
    "no_catalogue_seeds": "invalidState",
    # 405, 406, 429: the original has no token of its own for these
    "method_not_allowed": "methodNotAllowed",
    "not_acceptable": "notAcceptable",
    "throttled": "tooManyRequests",
    # 5xx: someone else, or us
    "upstream_unavailable": "serenityUpstreamError",
    "database_unavailable": "serviceUnavailable",
    "semrush_unavailable": "serenityUpstreamError",
    "credential_unavailable": "serenityUpstreamError",
    "not_attempted": "serviceUnavailable",
    "delete_not_finished": "serviceUnavailable",
    "prompt_generation_unavailable": "serviceUnavailable",
    "internal_error": "internalServerError",
}
# A code without an entry (one added later) gets the original's token for its status.
_TOKEN_BY_STATUS = {
    400: "invalidRequest",
    401: "authenticationRequired",
    403: "forbidden",
    404: "notFound",
    409: "conflict",
    429: "tooManyRequests",
    500: "internalServerError",
    502: "serenityUpstreamError",
    503: "serviceUnavailable",
}


def error_token(code: str, status: int) -> str:
    """The original service's `error` token for one of our codes (by status for a code it has no case for)."""
    return ORIGINAL_ERROR_TOKENS.get(code) or _TOKEN_BY_STATUS.get(status, "invalidRequest")


_UNSAFE = re.compile(r"[^\x20-\x7e]+")


def safe_message(text: str) -> str:
    """A sentence fit for a body's `message` and the x-error header: printable ASCII only (no CR/LF, so no
    header splitting), at most MAX_MESSAGE_LENGTH characters, as the original sanitises it."""
    return _UNSAFE.sub(" ", str(text or "")).strip()[:MAX_MESSAGE_LENGTH]


class DomainError(Exception):
    """Base for errors the API answers deliberately. Subclasses set the three class attributes."""

    status: int = http.HTTP_400_BAD_REQUEST
    code: str = "bad_request"
    title: str = "Bad request"

    def __init__(self, detail: str | None = None, *, errors: list[dict] | None = None, headers=None):
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.errors = errors
        self.headers = headers or {}


class NotFound(DomainError):
    status, code, title = 404, "not_found", "Not found"


class Forbidden(DomainError):
    status, code, title = 403, "forbidden", "Forbidden"


class Conflict(DomainError):
    status, code, title = 409, "conflict", "Conflict"


class InvalidInput(DomainError):
    status, code, title = 400, "invalid", "Invalid request"


class DatabaseUnavailable(DomainError):
    """A request whose database connection was cut under it (a failover mid-request): nothing is retried for it
    (a write may have happened), and the client is told to try again in a second rather than given a 500."""

    status, code, title = 503, "database_unavailable", "The database did not answer; try again"


class UpstreamUnavailable(DomainError):
    status, code, title = 502, "upstream_unavailable", "An upstream service did not answer"


def problem(
    status: int,
    code: str,
    title: str,
    detail: str | None = None,
    *,
    error: str | None = None,
    message: str | None = None,
    **extra,
) -> dict:
    """A problem document: the RFC 9457 members, our `code`, and the original's `error` and `message`
    (by default the token for `code` and the detail, or the title)."""
    doc = {"type": TYPE_BASE + code.replace("_", "-"), "title": title, "status": status}
    if detail:
        doc["detail"] = detail
    doc["code"] = code
    doc["error"] = error or error_token(code, status)
    doc["message"] = safe_message(message or detail or title)
    doc.update({k: v for k, v in extra.items() if v is not None})
    return doc


def error_headers(doc: dict) -> dict:
    """`x-error: <message>` for a 403 or 404 problem document, as the original answers them."""
    return {ERROR_HEADER: doc["message"]} if doc.get("status") in ERROR_HEADER_STATUSES else {}


def problem_response(doc: dict, headers: dict | None = None) -> JsonResponse:
    """The answer for a problem document: always JSON, whatever the view renders otherwise (the schema's YAML,
    the docs' HTML), so the content type says what the body is."""
    return JsonResponse(
        doc, status=doc["status"], headers={**(headers or {}), **error_headers(doc)}, content_type=PROBLEM_CONTENT_TYPE
    )


# DRF exception class -> (code, title). The `code` is stable; clients may branch on it.
_DRF_CODES = {
    drf_exceptions.NotAuthenticated: ("not_authenticated", "Authentication required"),
    drf_exceptions.AuthenticationFailed: ("authentication_failed", "Invalid credentials"),
    drf_exceptions.PermissionDenied: ("forbidden", "Forbidden"),
    drf_exceptions.NotFound: ("not_found", "Not found"),
    drf_exceptions.MethodNotAllowed: ("method_not_allowed", "Method not allowed"),
    drf_exceptions.NotAcceptable: ("not_acceptable", "Not acceptable"),
    drf_exceptions.UnsupportedMediaType: ("unsupported_media_type", "Unsupported media type"),
    drf_exceptions.ParseError: ("malformed_request", "Malformed request body"),
    drf_exceptions.Throttled: ("throttled", "Too many requests"),
    drf_exceptions.ValidationError: ("invalid", "Invalid request"),
}


def _pointer(path: list) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path) if path else ""


def validation_errors(detail, path=None) -> list[dict]:
    """Flatten DRF's nested ValidationError detail into [{pointer, code, message}], one per failure."""
    path = path or []
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            sub = path if key == "non_field_errors" else [*path, key]
            out += validation_errors(value, sub)
        return out
    if isinstance(detail, list):
        if all(isinstance(d, (drf_exceptions.ErrorDetail, str)) for d in detail):
            return [
                {"pointer": _pointer(path), "code": getattr(d, "code", "invalid"), "message": str(d)} for d in detail
            ]
        out = []
        for index, value in enumerate(detail):
            out += validation_errors(value, [*path, index])
        return out
    return [{"pointer": _pointer(path), "code": getattr(detail, "code", "invalid"), "message": str(detail)}]


def problem_exception_handler(exc, context):
    """DRF EXCEPTION_HANDLER: DomainError and every APIException become problem+json; a connection the database
    dropped under the request a retryable 503 (DatabaseUnavailable)."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        log.warning("request met a dropped database connection", extra={"error": type(exc).__name__})
        exc = DatabaseUnavailable(headers={"Retry-After": "1"})
    if isinstance(exc, DomainError):
        exc_for_drf = drf_exceptions.APIException(exc.detail)
        exc_for_drf.status_code = exc.status
        response = drf_exception_handler(exc_for_drf, context)  # rollback + standard headers
        doc = problem(exc.status, exc.code, exc.title, exc.detail, errors=exc.errors)
        return problem_response(doc, headers={**_passed_headers(response), **exc.headers})

    from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
    from django.http import Http404

    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf_exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # unknown: Django logs it and answers the generic 500 below
    code, title = next((v for cls, v in _DRF_CODES.items() if isinstance(exc, cls)), ("error", "Request failed"))
    errors = None
    detail = None
    if isinstance(exc, drf_exceptions.ValidationError):
        errors = validation_errors(exc.detail)
        # The original's message: each failure's sentence, joined (the pointers are in `errors`).
        detail = "; ".join(dict.fromkeys(e["message"] for e in errors)) or "The request body is invalid."
    elif isinstance(exc.detail, str):
        detail = str(exc.detail)
    doc = problem(response.status_code, code, title, detail, errors=errors)
    return problem_response(doc, _passed_headers(response))


def _passed_headers(response) -> dict:
    """The headers of DRF's own answer a problem keeps: the ones that tell the client what to do next."""
    if response is None:
        return {}
    return {k: v for k, v in response.headers.items() if k in ("WWW-Authenticate", "Retry-After", "Allow")}


def _plain_problem(status: int, code: str, title: str, request=None):
    doc = problem(status, code, title)
    rid = getattr(request, "request_id", None)
    if rid:
        doc["requestId"] = rid
    return JsonResponse(doc, status=status, content_type=PROBLEM_CONTENT_TYPE, headers=error_headers(doc))


def handler404(request, exception=None):
    return _plain_problem(404, "not_found", "Not found", request)


def handler500(request):
    # The exception was already logged by Django with the request id; the body names only the id.
    return _plain_problem(500, "internal_error", "Internal server error", request)


def handler400(request, exception=None):
    return _plain_problem(400, "bad_request", "Bad request", request)


def handler403(request, exception=None):
    return _plain_problem(403, "forbidden", "Forbidden", request)
