"""The OpenAPI description of the onboarding routes (SPEC §3, §3.1), kept beside the views so each view reads as
what it does: one set of `extend_schema` arguments per view (at the end), the headers and problems they
answer, and the request bodies.

The request bodies are exactly what markets/onboarding/inputs.py accepts, so schemathesis can hold the two to
each other. They are written as JSON Schema (drf-spectacular takes them as they are) because the original's
rules (one of two fields, any case, a catalogue) are not a serializer's; registered as components by
`register_components`, a postprocessing hook. The answers are described by their serializers
(markets/onboarding/dto.py), which also render them."""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from markets import geo
from markets.onboarding.dto import (
    ActivationOutput,
    BrandCreatedOutput,
    LanguageListOutput,
    MarketCreatedOutput,
    MarketDetailOutput,
    MarketListOutput,
    ModelListOutput,
)
from markets.onboarding.inputs import (
    BRAND_STATUSES,
    DOMAIN_OR_URL,
    GUIDANCE,
    GUIDANCE_FIELDS,
    GUIDANCE_MAX_LENGTH,
    MAX_ACTIVATE_MARKETS,
    PROFILE_FIELDS,
    TEXT,
)
from markets.openapi import PATH_IDS, audience_parameter, promise_token_parameter
from serenity.openapi import X_ERROR_HEADER, problem_described
from serenity.problems import PROBLEM_CONTENT_TYPE

TEXT_SCHEMA = {"type": "string", "pattern": TEXT, "description": "A text: something besides white space, no NUL."}
TEXTS_SCHEMA = {"type": "array", "minItems": 1, "items": TEXT_SCHEMA}
NOT_TEXT = {"not": TEXT_SCHEMA}
UUID_SCHEMA = {
    "type": "string",
    "format": "uuid",
    "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
}
MARKET_SCHEMA = {
    "type": "string",
    "pattern": geo.MARKET_PATTERN,
    "description": "ISO 3166-1 alpha-2 country code, in any case (stored in capitals), e.g. `us`.",
}
LANGUAGE_SCHEMA = {
    "type": "string",
    "pattern": geo.LANGUAGE_PATTERN,
    "description": "BCP-47 language tag in any case (stored lower-cased), e.g. `fr`, `de-CH`: a "
    "primary subtag of Semrush's language catalogue and an optional region or script. "
    "Semrush's live catalogue decides (400 `unknownLanguage`).",
}
DOMAIN_SCHEMA = {
    "type": "string",
    "pattern": DOMAIN_OR_URL,
    "description": "A domain name or an http(s) URL; its host is the domain used.",
}

CREATE_MARKET_BODY = {
    "type": "object",
    "description": "One market of the brand (the original's `SerenityCreateMarketRequest`). Unknown fields are "
    "ignored. `brandDomain` or `siteId` is required; a `siteId` that names no site of the brand's "
    "organization answers 400.",
    "required": ["market", "languageCode", "brandNames"],
    # Given means a text (the original's `hasText`): a value that is none counts as absent, as the server reads it.
    "anyOf": [
        {"required": ["brandDomain"], "properties": {"brandDomain": TEXT_SCHEMA}},
        {"required": ["siteId"], "properties": {"siteId": TEXT_SCHEMA}},
    ],
    "properties": {
        "market": MARKET_SCHEMA,
        "languageCode": LANGUAGE_SCHEMA,
        "brandNames": {
            **TEXTS_SCHEMA,
            "description": "The brand's names in this market (the first is its display "
            "name unless `brandDisplayName` says otherwise).",
        },
        "brandDomain": {
            "anyOf": [DOMAIN_SCHEMA, NOT_TEXT],
            "description": DOMAIN_SCHEMA["description"] + " A value that is no text counts as absent.",
        },
        "siteId": {
            "anyOf": [UUID_SCHEMA, NOT_TEXT],
            "description": "A site of the brand (or an unassigned site of its "
            "organization): the market tracks its domain and is linked to it. A value that is no text counts as "
            "absent.",
        },
        "name": {**TEXT_SCHEMA, "description": "The Semrush project's name; default `<MARKET>-<languageCode>`."},
        "brandDisplayName": {"description": "Accepted; stored with the market (a text), else ignored."},
        "primaryUrl": {"description": "Accepted, not used: the server derives the URL the market tracks."},
        "generatePrompts": {
            "description": "Generation runs only for JSON `true` (and with "
            "SERENITY_ASYNC_PROMPT_GEN on: the asynchronous producer)."
        },
    },
}

ACTIVATE_BODY = {
    "type": "object",
    "description": "Every field optional (the original's `SerenityActivateRequest`); unknown fields are ignored. A "
    "pending brand ignores the body. An active brand provisions `markets` (or US/en when none is "
    "listed) when `brandDomain` is given; each market that breaks a createMarket rule is answered "
    "in its own entry.",
    "properties": {
        "generatePrompts": {"description": "Generation for the new markets only for JSON `true`."},
        "brandDomain": {
            "description": "The domain the markets track (a domain or URL); without it nothing is provisioned."
        },
        "brandNames": {"description": "The brand's names, for every market (a non-empty array of texts)."},
        "brandDisplayName": {"description": "Accepted; stored with each market."},
        "primaryUrl": {"description": "Accepted, not used."},
        "markets": {
            "description": f"At most {MAX_ACTIVATE_MARKETS} entries `{{market, languageCode, name?, modelIds?}}`; a "
            "value that is not an array counts as none.",
            "anyOf": [{"type": "array", "maxItems": MAX_ACTIVATE_MARKETS}, {"not": {"type": "array"}}],
        },
    },
}

CREATE_BRAND_BODY: dict[str, Any] = {
    "type": "object",
    "description": "A brand (the original's `V2BrandInput` with `semrushMarket`, `semrushModelIds` and "
    "`generatePrompts`); unknown fields are ignored. Created, or updated when the organization has "
    "a brand of that name. In a Serenity organization an active brand gets its Semrush "
    "sub-workspace and, with `semrushMarket`, its first market.",
    "required": ["name"],
    "properties": {
        "name": TEXT_SCHEMA,
        "status": {
            "enum": list(BRAND_STATUSES),
            "description": "Default `active`; a pending brand gets nothing in Semrush until it is activated.",
        },
        "urls": {
            "type": "array",
            "items": {
                "anyOf": [
                    DOMAIN_SCHEMA,
                    {"type": "object", "required": ["value"], "properties": {"value": DOMAIN_SCHEMA}},
                ]
            },
            "description": "The brand's URLs (strings or `{value}`); the first one with a value is its primary URL "
            "and gives its domain.",
        },
        "semrushMarket": {
            "description": "`{market, languageCode}` (both required when the object is not empty): the brand's "
            "first market. Any other value counts as none.",
            "anyOf": [
                {"not": {"type": "object"}},
                {"type": "object", "maxProperties": 0},
                {
                    "type": "object",
                    "required": ["market", "languageCode"],
                    "properties": {"market": MARKET_SCHEMA, "languageCode": LANGUAGE_SCHEMA},
                },
            ],
        },
        "generatePrompts": {
            "description": "Prompts for the first market only for JSON `true`; then "
            "`semrushModelIds` must list a model."
        },
        "semrushModelIds": {"description": "The AI models the brand's projects track; stored."},
        "brandAliases": {"description": "Other names of the brand: strings or `{name, regions}`."},
        "baseSiteId": {
            **UUID_SCHEMA,
            "description": "An existing site of the organization to be the brand's base site.",
        },
        **{key: {"description": "Accepted, stored and returned; not used."} for key in PROFILE_FIELDS},
        **{
            key: {
                "type": "string",
                "nullable": True,
                "pattern": GUIDANCE,
                "description": f"A text or null, at most {GUIDANCE_MAX_LENGTH} characters once trimmed, as the "
                "original checks it; stored and returned, not used.",
            }
            for key in GUIDANCE_FIELDS
        },
        "domain": {
            **DOMAIN_SCHEMA,
            "description": "Ours, from before `urls`: the brand's domain when `urls` is empty.",
        },
        "primaryUrl": {
            **DOMAIN_SCHEMA,
            "description": "Ours, from before `urls`: the brand's URL when `urls` is empty.",
        },
        "aliases": {"description": "Ours, from before `brandAliases`: used when `brandAliases` is absent."},
    },
}

# The original's rules for the Semrush work a createBrand asks for (inputs.semrush_work_errors), as schema.
NO_MARKET = {"anyOf": [{"not": {"type": "object"}}, {"type": "object", "maxProperties": 0}]}
PENDING = {"required": ["status"], "properties": {"status": {"enum": ["pending"]}}}
NOT_GENERATING = {"properties": {"generatePrompts": {"not": {"enum": [True]}}}}
CREATE_BRAND_BODY["allOf"] = [
    # Generation needs a market.
    {
        "anyOf": [
            NOT_GENERATING,
            {"required": ["semrushMarket"], "properties": {"semrushMarket": {"type": "object", "minProperties": 1}}},
        ]
    },
    # An active brand's market needs a primary URL.
    {
        "anyOf": [
            PENDING,
            {"properties": {"semrushMarket": NO_MARKET}},
            {"required": ["urls"], "properties": {"urls": {"minItems": 1}}},
            {"required": ["primaryUrl"]},
            {"required": ["domain"]},
        ]
    },
    # An active brand's generation needs at least one AI model.
    {
        "anyOf": [
            PENDING,
            NOT_GENERATING,
            {"required": ["semrushModelIds"], "properties": {"semrushModelIds": TEXTS_SCHEMA}},
        ]
    },
]

COMPONENTS = {
    "CreateBrandRequest": CREATE_BRAND_BODY,
    "CreateMarketRequest": CREATE_MARKET_BODY,
    "ActivateRequest": ACTIVATE_BODY,
}


def ref(name: str) -> dict:
    assert name in COMPONENTS
    return {"$ref": f"#/components/schemas/{name}"}


def register_components(result, generator, request, public):
    """drf-spectacular postprocessing hook: the request bodies above become named components, and the bodies
    createBrand and createMarket cannot do without are marked required."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(COMPONENTS)
    for path in result.get("paths", {}).values():
        for operation in path.values():
            body = operation.get("requestBody", {}) if isinstance(operation, dict) else {}
            schema = body.get("content", {}).get("application/json", {}).get("schema", {})
            if schema.get("$ref", "").endswith(("/CreateBrandRequest", "/CreateMarketRequest")):
                body["required"] = True
    return result


# --- Headers and problems ----------------------------------------------------------------------------------------

AUDIENCE_DESCRIPTION = (
    "`semrush` (any case) to delegate with the Semrush client pair (required for prompt "
    "generation); absent or empty: the default pair. Anything else is a 400"
)
PROMISE_TOKEN = promise_token_parameter(
    "A promise token of the caller's, bare (URL-encoded, as the original's UI sends "
    'it) or as the typed JSON object `{promise_token, token_type: "promise_token", '
    "expires_in}`. It is exchanged at IMS on the selected pair: the request's Semrush "
    "calls use the access token (401 `Invalid or expired promise token` when the "
    "exchange fails), its first new job the rotated promise token, every other new "
    "job a token minted from the access token. Absent: the caller's IMS bearer; a "
    "session-token caller must send it (401 `PROMISE_TOKEN_REQUIRED`)."
)
PROMISE_HEADERS = [audience_parameter(AUDIENCE_DESCRIPTION + "."), PROMISE_TOKEN, X_ERROR_HEADER]
# createBrand reads the audience only when the brand needs Semrush work (as the original does): a pending brand,
# or any brand of an organization without Serenity, is created whatever it says.
BRAND_PROMISE_HEADERS = [
    audience_parameter(
        AUDIENCE_DESCRIPTION + " when the brand needs Semrush work "
        "(an active brand of an organization with Serenity on); otherwise not read."
    ),
    PROMISE_TOKEN,
    X_ERROR_HEADER,
]

PROBLEMS = {
    (400, PROBLEM_CONTENT_TYPE): problem_described(
        "The body breaks a rule (`invalidRequest`, with every failed rule "
        "in `message`), an unknown market or language "
        "(`unknownMarket`, `unknownLanguage`), or an unusable header."
    ),
    (401, PROBLEM_CONTENT_TYPE): problem_described(
        "Missing, invalid or expired bearer token, or Semrush refused the "
        "credential the request acted with (`Upstream authorization "
        "failed`)."
    ),
    (403, PROBLEM_CONTENT_TYPE): problem_described(
        "Not a member of the organization (or the `x-promise-token` was minted from a bearer that did not name it: "
        "the same answer), or Semrush would not let the request's credential do this (`Upstream authorization "
        "failed`)."
    ),
    (404, PROBLEM_CONTENT_TYPE): problem_described(
        "No such organization or brand for this caller, or Serenity is not active for the brand."
    ),
    (409, PROBLEM_CONTENT_TYPE): problem_described("The market is already live (`sliceExists`)."),
    (429, PROBLEM_CONTENT_TYPE): problem_described(
        "Too many requests by this user, or markets of this organization: retry after `Retry-After` seconds."
    ),
    (502, PROBLEM_CONTENT_TYPE): problem_described("Semrush did not complete the request (`serenityUpstreamError`)."),
    (503, PROBLEM_CONTENT_TYPE): problem_described("Not attempted within the request's time budget: send it again."),
}


# --- Keyword arguments of extend_schema, one set per view -------------------------------------------------------

CREATE_BRAND: dict[str, Any] = dict(
    operation_id="createBrand",
    request={"application/json": ref("CreateBrandRequest")},
    parameters=[*PATH_IDS[:1], *BRAND_PROMISE_HEADERS],
    responses={201: BrandCreatedOutput, **PROBLEMS},
)
CREATE_MARKET: dict[str, Any] = dict(
    operation_id="createMarket",
    request={"application/json": ref("CreateMarketRequest")},
    parameters=[*PATH_IDS[:2], *PROMISE_HEADERS],
    responses={201: MarketCreatedOutput, **PROBLEMS},
)
ACTIVATE: dict[str, Any] = dict(
    operation_id="activateMarkets",
    request={"application/json": ref("ActivateRequest")},
    parameters=[*PATH_IDS[:2], *PROMISE_HEADERS],
    responses={200: ActivationOutput, 207: OpenApiResponse(ActivationOutput, "Some market failed"), **PROBLEMS},
)


# --- The market journey around onboarding (SPEC §3.1) ------------------------------------------------------------

SLICE = [
    OpenApiParameter(
        "geoTargetId",
        {"type": "integer", "minimum": 1},
        OpenApiParameter.PATH,
        description="The market's Google Ads country criterion id (2000 + ISO 3166-1 numeric, e.g. 2250 for "
        "France): ASCII digits only (`2840abc` is a 400, never read as 2840). Any other positive integer "
        "names no market.",
    ),
    OpenApiParameter(
        "languageCode",
        {"type": "string", "pattern": "^[A-Za-z]{2,3}(-[A-Za-z]{2,4})?$"},
        OpenApiParameter.PATH,
        description="The market's language, a BCP-47 tag in any case (read lower-cased, e.g. `fr`, `de-ch`).",
    ),
]
READ_PROBLEMS = {
    (400, PROBLEM_CONTENT_TYPE): problem_described("A path id or slice part is malformed (`invalidRequest`)."),
    (401, PROBLEM_CONTENT_TYPE): problem_described("Missing, invalid or expired bearer token."),
    (403, PROBLEM_CONTENT_TYPE): problem_described("Not a member of the organization."),
    (404, PROBLEM_CONTENT_TYPE): problem_described(
        "No such organization or brand for this caller, or Serenity is not active for the brand."
    ),
}
CATALOGUE_PROBLEMS = {
    (400, PROBLEM_CONTENT_TYPE): problem_described("`orgId` is not a UUID, or an unusable header."),
    (401, PROBLEM_CONTENT_TYPE): problem_described(
        "Missing, invalid or expired bearer token; a session token without `x-promise-token`; or Semrush refused "
        "the credential the request acted with (`Upstream authorization failed`)."
    ),
    (403, PROBLEM_CONTENT_TYPE): problem_described(
        "Not a member of the organization (or the `x-promise-token` was minted from a bearer that did not name it: "
        "the same answer), or Semrush would not let the request's credential read it."
    ),
    (404, PROBLEM_CONTENT_TYPE): problem_described("No such organization."),
    (502, PROBLEM_CONTENT_TYPE): problem_described("Semrush failed (`serenityUpstreamError`)."),
}
READ_PROMISE_HEADERS = [
    audience_parameter(AUDIENCE_DESCRIPTION + "."),
    promise_token_parameter(
        "A promise token of the caller's, as for createMarket: the request's Semrush calls act with what IMS "
        "exchanges it for (401 `Invalid or expired promise token` when the exchange fails). Absent: the caller's "
        "IMS bearer; a session-token caller must send it (401 `PROMISE_TOKEN_REQUIRED`)."
    ),
    X_ERROR_HEADER,
]

LIST_MARKETS: dict[str, Any] = dict(
    operation_id="listMarkets",
    summary="List the brand's markets",
    description="Every market of the brand whose Semrush project exists, oldest first, each with its latest prompt "
    "generation (`promptGeneration`, the poll's token-safe projection: a UI that lost a job id finds it here). "
    "Read from this service's records: no Semrush call, no promise token needed.",
    parameters=[*PATH_IDS[:2], X_ERROR_HEADER],
    responses={200: MarketListOutput, **READ_PROBLEMS},
)
GET_MARKET: dict[str, Any] = dict(
    operation_id="getMarket",
    summary="One market of the brand, with its Semrush project id",
    description="The market of one (geoTargetId, languageCode) slice, with `semrushProjectId` (the id the embedded "
    "Semrush dashboard mounts). Read from this service's records: no Semrush call, no promise token needed.",
    parameters=[*PATH_IDS[:2], *SLICE, X_ERROR_HEADER],
    responses={
        200: MarketDetailOutput,
        **READ_PROBLEMS,
        (404, PROBLEM_CONTENT_TYPE): problem_described(
            "No such organization or brand for this caller, Serenity is not active for the brand, or the brand has "
            "no market of this slice (`marketNotFound`; another tenant's brand answers as one that does not exist)."
        ),
    },
)
DELETE_MARKET: dict[str, Any] = dict(
    operation_id="deleteMarket",
    summary="Delete a market of the brand",
    description="Idempotent: a slice without a market answers 204. A prompt generation in flight is cancelled (its "
    "job ends FAILED `MARKET_DELETED`, its credential invalidated) and nothing it sends reaches Semrush after this "
    "answer; then the market's Semrush project is deleted (Semrush not having it is success), then the market. "
    "The project and its prompts are gone for good: confirm with the user first.",
    parameters=[*PATH_IDS[:2], *SLICE, *READ_PROMISE_HEADERS],
    responses={
        204: OpenApiResponse(description="Deleted, or there was nothing to delete."),
        **READ_PROBLEMS,
        (401, PROBLEM_CONTENT_TYPE): problem_described(
            "Missing, invalid or expired bearer token; a session token without `x-promise-token`; or Semrush refused "
            "the credential the request acted with (`Upstream authorization failed`): the market stays."
        ),
        (403, PROBLEM_CONTENT_TYPE): problem_described(
            "Not a member of the organization (or the `x-promise-token` was minted from a bearer that did not name "
            "it: the same answer), or Semrush would not let the request's credential delete the project: the market "
            "stays."
        ),
        (502, PROBLEM_CONTENT_TYPE): problem_described(
            "Semrush did not delete the project (`serenityUpstreamError`): the market stays (its generation, if one "
            "was running, stays cancelled); send the delete again."
        ),
        (503, PROBLEM_CONTENT_TYPE): problem_described(
            "Another delete of the market, or a generation write to it, did not end within the request's time "
            "budget: nothing was deleted; send it again (`Retry-After`)."
        ),
    },
)
LIST_LANGUAGES: dict[str, Any] = dict(
    operation_id="listLanguages",
    summary="The languages a market may be in (Semrush's catalogue)",
    description="For the add-brand wizard, before any brand exists: Semrush's language catalogue, sorted by name. "
    "createMarket refuses any other language (400 `unknownLanguage`). An empty list when Semrush does not serve "
    "the catalogue (404 or 405).",
    parameters=[PATH_IDS[0], *READ_PROMISE_HEADERS],
    responses={200: LanguageListOutput, **CATALOGUE_PROBLEMS},
)
LIST_MODELS: dict[str, Any] = dict(
    operation_id="listModels",
    summary="The AI models a market may track (Semrush's catalogue)",
    description="For the add-brand wizard, before any brand exists: Semrush's global AI-model catalogue (not a "
    "workspace's). An empty list when Semrush does not serve it (404 or 405).",
    parameters=[PATH_IDS[0], *READ_PROMISE_HEADERS],
    responses={200: ModelListOutput, **CATALOGUE_PROBLEMS},
)
