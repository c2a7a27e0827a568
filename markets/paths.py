"""The ids in the API's paths: parsed as the original's router does (a malformed one is a 400 naming it, not a
404). Shared by onboarding and generation routes; their OpenAPI description is in markets/openapi.py. A market's
slice in a path (`…/markets/{geoTargetId}/{languageCode}`) is parsed as the original's controller does."""

import re
import uuid

from markets import geo
from serenity.problems import InvalidInput

# What a malformed path id is told, as the original's router says it.
ID_MESSAGES = {
    "orgId": "Organization Id (spaceCatId) is invalid. Please provide a valid UUID.",
    "brandId": "Brand Id is invalid. Please provide a valid UUID.",
    "jobId": "Job Id is invalid. Please provide a valid UUID.",
    "marketId": "Market Id is invalid. Please provide a valid UUID.",
}


# What a malformed slice part is told, as the original's handlers say it.
SLICE_MESSAGES = {
    "geoTargetId": "geoTargetId must be a positive integer",
    "languageCode": f"languageCode must match {geo.LANGUAGE_TAG}",
}
DIGITS = re.compile(r"[0-9]+")
# A longer number is as positive as any other, and names no market: read no further than this.
MAX_DIGITS = 18


def parse_slice(geo_target_id: str, language_code: str) -> tuple[int, str]:
    """A market slice from a path: `geoTargetId` all ASCII digits and positive (`2840abc` is refused, never read as
    2840), `languageCode` lower-cased and then a BCP-47 tag of the accepted form (`EN` -> `en`). Either part
    malformed -> 400 naming every bad part. A well-formed slice may still name no market (the caller's 404)."""
    errors = []
    digits = geo_target_id.lstrip("0") if DIGITS.fullmatch(geo_target_id) else ""
    geo_target = int(digits or 0) if len(digits) <= MAX_DIGITS else 10**MAX_DIGITS
    if geo_target < 1:
        errors.append({"parameter": "geoTargetId", "code": "invalid", "message": SLICE_MESSAGES["geoTargetId"]})
    language = geo.language_tag(language_code)
    if language is None:
        errors.append({"parameter": "languageCode", "code": "invalid", "message": SLICE_MESSAGES["languageCode"]})
    if errors:
        raise InvalidInput("; ".join(e["message"] for e in errors), errors=errors)
    assert language is not None
    return geo_target, language


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
