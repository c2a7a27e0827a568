"""Every answer the conformance suite collects, checked against the original's response schema for its route and
status (tests/conformance/schemas/original.yaml), with jsonschema and its format checker (uuid, date-time).

A 2xx or 4xx answer on a route or status with no schema here is itself a failure: the map below is the list of
what the suite checks, and it grows with the suite. A status mapped to NO_BODY must come without one (a 204)."""

import re
from functools import cache
from pathlib import Path

import httpx
import jsonschema
import yaml

SCHEMAS = Path(__file__).parent / "schemas" / "original.yaml"
_ORG = r"/v2/orgs/[^/]+"
_BRAND = _ORG + r"/brands/[^/]+"
_JOB = _BRAND + r"/serenity/markets/generation/jobs/[^/]+"
# A market's slice: `…/markets/{geoTargetId}/{languageCode}` (never `generation/jobs`, never `{marketId}/generation`).
_SLICE = _BRAND + r"/serenity/markets/(?!generation/)[^/]+/(?!generation$)[^/]+"
NO_BODY = ""

# (method, path, status class or status) -> schema, after the original's operation:
#   createBrandForOrgV2 (docs/openapi/brands-v2-api.yaml), createSerenityMarket and activateSerenityBrand
#   (docs/openapi/serenity-api.yaml); the job routes are this service's (docs/spec.md, §7).
ROUTES: list[tuple[str, str, dict[int | str, str]]] = [
    ("POST", _ORG + r"/brands", {201: "V2Brand", "4xx": "BrandErrorResponse"}),
    ("POST", _BRAND + r"/serenity/markets", {201: "SerenityMarket", "4xx": "SerenityErrorResponse"}),
    (
        "POST",
        _BRAND + r"/serenity/activate",
        {
            200: "SerenityActivateResponse",
            207: "SerenityActivateResponse",
            # The original's 409: oneOf SerenityActivateResponse, SerenityErrorResponse.
            409: "SerenityActivateResponse|SerenityErrorResponse",
            "4xx": "SerenityErrorResponse",
        },
    ),
    # listSerenityMarkets, getSerenityMarket, deleteSerenityMarket, listSerenityOrgLanguages, listSerenityOrgModels
    # (docs/openapi/serenity-api.yaml).
    ("GET", _BRAND + r"/serenity/markets", {200: "SerenityMarketListResponse", "4xx": "SerenityErrorResponse"}),
    ("GET", _SLICE, {200: "SerenityMarketDetail", "4xx": "SerenityErrorResponse"}),
    ("DELETE", _SLICE, {204: NO_BODY, "4xx": "SerenityErrorResponse"}),
    ("GET", _ORG + r"/serenity/languages", {200: "SerenityLanguageListResponse", "4xx": "SerenityErrorResponse"}),
    ("GET", _ORG + r"/serenity/models", {200: "SerenityModelListResponse", "4xx": "SerenityErrorResponse"}),
    ("GET", _JOB, {200: "GenerationJob", "4xx": "SerenityErrorResponse"}),
    ("POST", _JOB + r"/reauth", {202: "GenerationJobReauthAccepted", "4xx": "SerenityErrorResponse"}),
]


@cache
def _document() -> dict:
    return yaml.safe_load(SCHEMAS.read_text())


def validator(names: str) -> jsonschema.Draft202012Validator:
    """A validator of `names` (one schema, or several joined by `|`: any of them), its `#/Name` references
    resolved in the schema file."""
    refs = [{"$ref": f"#/{name}"} for name in names.split("|")]
    root = {**_document(), **(refs[0] if len(refs) == 1 else {"anyOf": refs})}
    return jsonschema.Draft202012Validator(root, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def schema_for(method: str, path: str, status: int) -> str | None:
    for route_method, pattern, by_status in ROUTES:
        if route_method == method and re.fullmatch(pattern, path):
            return by_status[status] if status in by_status else by_status.get(f"{status // 100}xx")
    return None


def failures(response: httpx.Response) -> list[str]:
    """What is wrong with `response` against the original's schema: nothing for an answer other than a 2xx or
    4xx; a missing schema, a body that is no JSON, or each validation error."""
    request = response.request
    if response.status_code // 100 not in (2, 4):
        return []
    where = f"{request.method} {request.url.path} → {response.status_code}"
    names = schema_for(request.method, request.url.path, response.status_code)
    if names is None:
        return [f"{where}: no schema of the original's for this answer"]
    if names == NO_BODY:
        return [f"{where}: a body where the original sends none"] if response.content else []
    try:
        body = response.json()
    except ValueError:
        return [f"{where}: the body is not JSON"]
    return [
        f"{where} against {names}: {'/'.join(map(str, error.absolute_path)) or '(body)'}: {error.message}"
        for error in validator(names).iter_errors(body)
    ]
