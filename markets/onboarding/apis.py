"""The onboarding entry points (SPEC §3): create a brand, create a market, activate a brand's markets.

Thin views: scope the caller, read the body (markets/onboarding/inputs.py), call one service, render. The
bodies and answers are the original service's (its UI calls these), with this service's fields beside them.
"""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from markets.credentials import PromiseHeaders, require_semrush_credential, semrush_generation
from markets.models import Brand
from markets.onboarding import schemas
from markets.onboarding.activation import brand_activate, markets_requested
from markets.onboarding.brands import FirstMarketFailed, brand_create, brand_semrush_work
from markets.onboarding.inputs import activate_request, brand_request, market_request
from markets.onboarding.provisioning import MarketOutcome, market_create
from markets.paths import PATH_IDS, parse_ids
from markets.selectors import org_get_for_caller, serenity_brand_get_for_caller
from serenity import limits
from serenity.openapi import X_ERROR_HEADER, problem_response
from serenity.problems import PROBLEM_CONTENT_TYPE, InvalidInput
from serenity.problems import problem_response as problem_answer
from tokens.delegation import PROMISE_TOKEN_PATTERN

# `semrush` in any case with spaces around it, or empty (the default pair), as HTTP allows.
# A brand's `origin`, as the original's V2Brand enumerates it (a user's create is `human`).
ORIGINS = ("human", "ai")
AUDIENCE_PATTERN = r"^[ \t]*(?:[Ss][Ee][Mm][Rr][Uu][Ss][Hh])?[ \t]*$"

AUDIENCE_DESCRIPTION = (
    "`semrush` (any case) to delegate with the Semrush client pair (required for prompt "
    "generation); absent or empty: the default pair. Anything else is a 400"
)
AUDIENCE_HEADER = OpenApiParameter(
    "x-promise-audience",
    {"type": "string", "pattern": AUDIENCE_PATTERN},
    OpenApiParameter.HEADER,
    required=False,
    description=AUDIENCE_DESCRIPTION + ".",
)
# createBrand reads the header only when the brand needs Semrush work (as the original does): a pending brand, or
# any brand of an organization without Serenity, is created whatever it says.
BRAND_AUDIENCE_HEADER = OpenApiParameter(
    "x-promise-audience",
    {"type": "string", "pattern": AUDIENCE_PATTERN},
    OpenApiParameter.HEADER,
    required=False,
    description=AUDIENCE_DESCRIPTION + " when the brand needs Semrush work "
    "(an active brand of an organization with Serenity on); otherwise not read.",
)
AUDIENCE_HEADERS = [
    AUDIENCE_HEADER,
    OpenApiParameter(
        "x-promise-token",
        {"type": "string", "pattern": PROMISE_TOKEN_PATTERN},
        OpenApiParameter.HEADER,
        required=False,
        description="A promise token of the caller's, bare (URL-encoded, as the original's UI sends "
        'it) or as the typed JSON object `{promise_token, token_type: "promise_token", '
        "expires_in}`. It is exchanged at IMS on the selected pair: the request's Semrush "
        "calls use the access token (401 `Invalid or expired promise token` when the "
        "exchange fails), its first new job the rotated promise token, every other new "
        "job a token minted from the access token. Absent: the caller's IMS bearer; a "
        "session-token caller must send it (401 `PROMISE_TOKEN_REQUIRED`).",
    ),
    X_ERROR_HEADER,
]

ERRORS = {
    (400, PROBLEM_CONTENT_TYPE): problem_response(
        "The body breaks a rule (`invalidRequest`, with every failed rule "
        "in `message`), an unknown market or language "
        "(`unknownMarket`, `unknownLanguage`), or an unusable header."
    ),
    (401, PROBLEM_CONTENT_TYPE): problem_response(
        "Missing, invalid or expired bearer token, or Semrush refused the "
        "credential the request acted with (`Upstream authorization "
        "failed`)."
    ),
    (403, PROBLEM_CONTENT_TYPE): problem_response(
        "Not a member of the organization, or Semrush would not let the "
        "request's credential do this (`Upstream authorization failed`)."
    ),
    (404, PROBLEM_CONTENT_TYPE): problem_response(
        "No such organization or brand for this caller, or Serenity is not active for the brand."
    ),
    (409, PROBLEM_CONTENT_TYPE): problem_response("The market is already live (`sliceExists`)."),
    (429, PROBLEM_CONTENT_TYPE): problem_response(
        "Too many requests by this user, or markets of this organization: retry after `Retry-After` seconds."
    ),
    (502, PROBLEM_CONTENT_TYPE): problem_response("Semrush did not complete the request (`serenityUpstreamError`)."),
    (503, PROBLEM_CONTENT_TYPE): problem_response("Not attempted within the request's time budget: send it again."),
}


class PromptGenerationHandle(serializers.Serializer):
    jobId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=["provisioning"])
    reused = serializers.BooleanField()


class SyncPromptsOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=["written", "partial", "skipped", "empty", "failed"])
    written = serializers.IntegerField()


class MarketCreatedOutput(serializers.Serializer):
    """A market: the original's fields first, then this service's."""

    brandId = serializers.UUIDField()
    geoTargetId = serializers.IntegerField(help_text="Google Ads country criterion id (2000 + ISO numeric).")
    languageCode = serializers.CharField()
    workspaceId = serializers.CharField(help_text="The brand's Semrush sub-workspace.")
    projectId = serializers.CharField(help_text="The market's Semrush AI project.")
    published = serializers.BooleanField()
    topicCount = serializers.IntegerField(required=False, help_text="Old synchronous path: topics prompts came from.")
    promptCount = serializers.IntegerField(required=False, help_text="Old synchronous path: prompts written.")
    promptGeneration = PromptGenerationHandle(required=False, help_text="When a generation job was queued.")
    id = serializers.UUIDField(help_text="This service's id of the market.")
    market = serializers.CharField(help_text="ISO 3166-1 alpha-2, in capitals.")
    name = serializers.CharField()
    siteId = serializers.UUIDField(allow_null=True)
    publishState = serializers.CharField()
    createdAt = serializers.DateTimeField()
    prompts = SyncPromptsOutput(required=False, help_text="Old synchronous path: what was written.")


class BrandOutput(serializers.Serializer):
    """A brand: the original's V2 brand fields, then this service's."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    baseSiteId = serializers.UUIDField(allow_null=True)
    baseUrl = serializers.CharField(allow_null=True)
    semrushSubWorkspaceId = serializers.CharField(allow_null=True)
    pendingSemrushProvisioning = serializers.JSONField(allow_null=True)
    status = serializers.ChoiceField(choices=Brand.Status.choices)
    urls = inline_serializer("BrandUrl", many=True, fields={"value": serializers.CharField()})
    brandAliases = inline_serializer(
        "BrandAlias",
        many=True,
        fields={"name": serializers.CharField(), "regions": serializers.ListField(child=serializers.CharField())},
    )
    siteIds = serializers.ListField(child=serializers.UUIDField())
    serenityActive = serializers.BooleanField()
    serenityActivatedAt = serializers.DateTimeField(allow_null=True)
    updatedAt = serializers.DateTimeField()
    updatedBy = serializers.CharField(allow_null=True)
    # As given; kept and returned, not used by this service.
    description = serializers.JSONField(allow_null=True)
    brandContext = serializers.JSONField(allow_null=True)
    mentionSentimentGuidance = serializers.JSONField(allow_null=True)
    vertical = serializers.JSONField(allow_null=True)
    origin = serializers.ChoiceField(choices=ORIGINS, help_text="As given when `human` or `ai`, else `human`.")
    region = serializers.JSONField(allow_null=True)
    competitors = serializers.JSONField(allow_null=True)
    socialAccounts = serializers.JSONField(allow_null=True)
    earnedContent = serializers.JSONField(allow_null=True)
    brandClaimsEnabled = serializers.JSONField(allow_null=True)
    displayName = serializers.CharField()
    domain = serializers.CharField()
    primaryUrl = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    semrushWorkspaceId = serializers.CharField(allow_null=True)
    semrushModelIds = serializers.ListField(child=serializers.CharField())
    createdAt = serializers.DateTimeField()


class BrandCreatedOutput(BrandOutput):
    promptGeneration = PromptGenerationHandle(
        required=False, help_text="When the first market's generation job was queued."
    )
    market = MarketCreatedOutput(required=False, help_text="The first market, when `semrushMarket` was given.")


class ActivationOutput(serializers.Serializer):
    brandId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=Brand.Status.choices)
    baseSiteId = serializers.UUIDField(required=False, allow_null=True)
    markets = inline_serializer(
        "ActivationEntry",
        many=True,
        fields={
            "market": serializers.JSONField(help_text="As sent."),
            "languageCode": serializers.JSONField(help_text="As sent."),
            "status": serializers.IntegerField(
                help_text="201 new, 409 already live, 400 the entry breaks a rule, 401 "
                "or 403 Semrush refused the request's credential, 502 Semrush "
                "failed, 503 not attempted in time (retryable)"
            ),
            "body": serializers.JSONField(help_text="The market (as createMarket answers it) or a problem document"),
        },
    )
    brand = BrandOutput(help_text="This service's: the brand after the activation.")


# --- Rendering -------------------------------------------------------------------------------------------------


def market_body(outcome: MarketOutcome) -> dict:
    if outcome.market is None:
        assert outcome.problem is not None  # a market not made always says why
        return outcome.problem
    market = outcome.market
    body = {
        "brandId": str(market.brand_id),
        "geoTargetId": market.geo_target_id,
        "languageCode": market.language_code,
        "workspaceId": market.brand.semrush_workspace_id,
        "projectId": market.semrush_project_id,
        "published": market.publish_state == market.PublishState.PUBLISHED,
    }
    if outcome.sync_prompts is not None:
        body.update(topicCount=outcome.sync_prompts["topics"], promptCount=outcome.sync_prompts["written"])
    if outcome.prompt_generation is not None:
        body["promptGeneration"] = outcome.prompt_generation
    body.update(
        {
            "id": str(market.id),
            "market": market.country,
            "name": market.name,
            "siteId": str(market.site_id) if market.site_id else None,
            "publishState": market.publish_state,
            "createdAt": serializers.DateTimeField().to_representation(market.created_at),
        }
    )
    if outcome.sync_prompts is not None:
        body["prompts"] = {"status": outcome.sync_prompts["status"], "written": outcome.sync_prompts["written"]}
    return body


def brand_body(brand: Brand) -> dict:
    when = serializers.DateTimeField().to_representation
    profile = brand.profile or {}
    return {
        "id": str(brand.id),
        "name": brand.name,
        "baseSiteId": str(brand.base_site_id) if brand.base_site_id else None,
        "baseUrl": brand.base_site.base_url if brand.base_site else (brand.primary_url or None),
        "semrushSubWorkspaceId": brand.semrush_workspace_id,
        "pendingSemrushProvisioning": None,
        "status": brand.status,
        "urls": [{"value": url} for url in brand.urls or []],
        "brandAliases": profile.get("brandAliases")
        or [{"name": alias, "regions": []} for alias in brand.aliases or []],
        "origin": profile.get("origin") if profile.get("origin") in ORIGINS else "human",
        "siteIds": [str(site_id) for site_id in brand.sites.order_by("created_at").values_list("id", flat=True)],
        "serenityActive": bool(brand.organization.is_serenity_active and brand.semrush_workspace_id),
        "serenityActivatedAt": when(brand.workspace_provisioned_at) if brand.workspace_provisioned_at else None,
        "updatedAt": when(brand.updated_at),
        "updatedBy": brand.updated_by or None,
        **{
            name: profile.get(name, default)
            for name, default in (
                ("description", None),
                ("brandContext", None),
                ("mentionSentimentGuidance", None),
                ("vertical", None),
                ("region", []),
                ("competitors", []),
                ("socialAccounts", []),
                ("earnedContent", []),
                ("brandClaimsEnabled", False),
            )
        },
        "displayName": brand.display_name or brand.name,
        "domain": brand.domain,
        "primaryUrl": brand.primary_url,
        "aliases": list(brand.aliases or []),
        "semrushWorkspaceId": brand.semrush_workspace_id,
        "semrushModelIds": list(brand.semrush_model_ids or []),
        "createdAt": when(brand.created_at),
    }


def json_object(request) -> dict:
    """The request body as a JSON object (an absent body is `{}`); anything else is a 400."""
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("The request body must be a JSON object.")
    return data


# --- Views -----------------------------------------------------------------------------------------------------


class BrandCreateApi(APIView):
    @extend_schema(
        operation_id="createBrand",
        request={"application/json": schemas.ref("CreateBrandRequest")},
        parameters=[*PATH_IDS[:1], BRAND_AUDIENCE_HEADER, *AUDIENCE_HEADERS[1:]],
        responses={201: BrandCreatedOutput, **ERRORS},
    )
    def post(self, request, orgId):
        (org_id,) = parse_ids(orgId=orgId)
        org = org_get_for_caller(request.user, org_id)
        brand_input = brand_request(json_object(request))
        semrush_work = brand_semrush_work(org=org, request=brand_input)
        limits.charge_entry_point(request.user, org.id, markets=int(semrush_work and brand_input.market is not None))
        try:
            if semrush_work:
                promise = PromiseHeaders.of(request.headers)
                require_semrush_credential(request.user, promise)
                with semrush_generation(
                    request.user, promise, generate_prompts=brand_input.generate_prompts
                ) as generation:
                    created = brand_create(caller=request.user, org=org, request=brand_input, generation=generation)
            else:
                created = brand_create(caller=request.user, org=org, request=brand_input, generation=None)
        except FirstMarketFailed as failed:
            return problem_answer(market_body(failed.outcome))
        body = brand_body(created.brand)
        if created.market is not None:
            body["market"] = market_body(created.market)
            if created.market.prompt_generation is not None:
                body["promptGeneration"] = created.market.prompt_generation
        return Response(body, status=201)


class MarketCreateApi(APIView):
    @extend_schema(
        operation_id="createMarket",
        request={"application/json": schemas.ref("CreateMarketRequest")},
        parameters=[*PATH_IDS[:2], *AUDIENCE_HEADERS],
        responses={201: MarketCreatedOutput, **ERRORS},
    )
    def post(self, request, orgId, brandId):
        promise = PromiseHeaders.of(request.headers)
        require_semrush_credential(request.user, promise)
        brand = serenity_brand_get_for_caller(request.user, *parse_ids(orgId=orgId, brandId=brandId))
        body = json_object(request)
        market_input = market_request(body)
        limits.charge_entry_point(request.user, brand.organization_id, markets=1)
        with semrush_generation(
            request.user, promise, generate_prompts=body.get("generatePrompts") is True
        ) as generation:
            outcome = market_create(caller=request.user, brand=brand, request=market_input, generation=generation)
        if outcome.market is None:
            return problem_answer(market_body(outcome))
        return Response(market_body(outcome), status=201)


class BrandActivateApi(APIView):
    @extend_schema(
        operation_id="activateMarkets",
        request={"application/json": schemas.ref("ActivateRequest")},
        parameters=[*PATH_IDS[:2], *AUDIENCE_HEADERS],
        responses={200: ActivationOutput, 207: OpenApiResponse(ActivationOutput, "Some market failed"), **ERRORS},
    )
    def post(self, request, orgId, brandId):
        promise = PromiseHeaders.of(request.headers)
        require_semrush_credential(request.user, promise)
        brand = serenity_brand_get_for_caller(request.user, *parse_ids(orgId=orgId, brandId=brandId))
        activate_input = activate_request(json_object(request))
        limits.charge_entry_point(
            request.user,
            brand.organization_id,
            markets=markets_requested(brand=brand, request=activate_input),
        )
        with semrush_generation(request.user, promise, generate_prompts=activate_input.generate_prompts) as generation:
            activation = brand_activate(caller=request.user, brand=brand, request=activate_input, generation=generation)
        brand.refresh_from_db()
        body: dict[str, Any] = {"brandId": str(brand.id), "status": brand.status}
        if activation.all_live:
            body["baseSiteId"] = str(brand.base_site_id) if brand.base_site_id else None
        body["markets"] = [
            {"market": o.market_as_sent, "languageCode": o.language_as_sent, "status": o.status, "body": market_body(o)}
            for o in activation.markets
        ]
        body["brand"] = brand_body(brand)
        return Response(body, status=activation.status)
