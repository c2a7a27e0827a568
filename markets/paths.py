"""The ids in the API's paths: parsed as the original's router does (a malformed one is a 400 naming it, not a
404). Shared by onboarding and generation routes; their OpenAPI description is in markets/openapi.py."""

import uuid

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
