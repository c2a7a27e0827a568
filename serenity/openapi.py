"""What the OpenAPI description of every API shares: the ways a caller authenticates and the problem-details
body.

drf-spectacular finds `BearerScheme` when this module is imported, which the URL configuration does before any
schema is generated.
"""

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import BasePermission


class BearerScheme(OpenApiAuthenticationExtension):
    """Describes serenity.auth.BearerAuthentication: any one of three ways in."""

    target_class = "serenity.auth.BearerAuthentication"
    name = ["imsBearer", "sessionToken", "sessionCookie"]

    def get_security_requirement(self, auto_schema):
        return [{name: []} for name in self.name]  # alternatives: any one of them

    def get_security_definition(self, auto_schema):
        return [
            {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": "An IMS user access token (RS256 JWT) listing the organization in `org_ids`.",
            },
            {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": "A SpaceCat session token (ES256 JWT) listing the organization in `tenants[].id`. "
                "Calls that reach Semrush also need `x-promise-token`.",
            },
            {
                "type": "apiKey",
                "in": "cookie",
                "name": "sessionToken",
                "description": "The same session token in the `sessionToken` cookie.",
            },
        ]


class ProblemFieldErrorSerializer(serializers.Serializer):
    pointer = serializers.CharField(required=False, help_text="JSON pointer to the offending body field (RFC 6901).")
    parameter = serializers.CharField(required=False, help_text="The offending path or header parameter.")
    code = serializers.CharField()
    message = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details, served as `application/problem+json`, with the original service's envelope
    (`error`, `message`); a 403 or 404 also carries `x-error: <message>`."""

    type = serializers.URLField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField(required=False)
    code = serializers.CharField(help_text="Stable machine-readable code; clients may branch on it.")
    error = serializers.CharField(
        help_text="The original service's token for the case, e.g. `sliceExists`, "
        "`unknownLanguage`, `invalidRequest`, `notFound`."
    )
    message = serializers.CharField(help_text="A sanitised sentence saying what went wrong.")
    # DRF's metaclass takes declared fields off the class, so this field does not replace Serializer.errors.
    errors = ProblemFieldErrorSerializer(  # type: ignore[assignment]
        many=True, required=False, help_text="One entry per invalid field."
    )
    requestId = serializers.CharField(required=False)


def problem_described(description: str) -> OpenApiResponse:
    """An answer documented as a problem document (served as application/problem+json)."""
    return OpenApiResponse(response=ProblemSerializer, description=description)


# The header the original's 403 and 404 answers carry (serenity.problems.error_headers).
X_ERROR_HEADER = OpenApiParameter(
    "x-error",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[403, 404],
    required=True,
    description="The problem's `message`, as the original sends it.",
)


class ApiDocsAccess(BasePermission):
    """/api/docs and /api/schema: anyone when API_DOCS_PUBLIC (local runs by default), else a staff session
    (the admin's login)."""

    def has_permission(self, request, view):
        if settings.API_DOCS_PUBLIC:
            return True
        user = getattr(request, "user", None)
        return bool(user and user.is_authenticated and user.is_staff)
