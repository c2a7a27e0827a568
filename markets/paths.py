"""The ids in the API's paths: parsed as the original's router does (a malformed one is a 400 naming it, not a
404), and described once for the OpenAPI document. Shared by onboarding and generation routes."""

import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from serenity.problems import InvalidInput

# What a malformed path id is told, as the original's router says it.
ID_MESSAGES = {
    "orgId": "Organization Id (spaceCatId) is invalid. Please provide a valid UUID.",
    "brandId": "Brand Id is invalid. Please provide a valid UUID.",
    "jobId": "Job Id is invalid. Please provide a valid UUID.",
    "marketId": "Market Id is invalid. Please provide a valid UUID.",
}


def parse_ids(**ids: str) -> list[uuid.UUID]:
    """The path ids as UUIDs, in the order given. Any malformed one -> 400 naming every bad parameter."""
    parsed, errors = [], []
    for name, value in ids.items():
        try:
            parsed.append(uuid.UUID(value))
        except ValueError:
            errors.append({"parameter": name, "code": "invalid_uuid", "message": ID_MESSAGES[name]})
    if errors:
        raise InvalidInput(" ".join(e["message"] for e in errors), errors=errors)
    return parsed


PATH_IDS = [
    OpenApiParameter("orgId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The organization."),
    OpenApiParameter("brandId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="A brand of the organization."),
    OpenApiParameter(
        "jobId",
        OpenApiTypes.UUID,
        OpenApiParameter.PATH,
        description="The job id from `promptGeneration.jobId` of an entry point's response.",
    ),
]
MARKET_ID = OpenApiParameter("marketId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The market.")
