"""Onboarding entry points (SPEC §3): create a brand, create a market, activate markets.

Thin views: parse and validate, call one service, serialize. Errors are problem+json.
"""
from django.db.models import Q
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from markets import services
from markets.generation_apis import forwarded_token
from markets.inputs import (
    DomainField,
    HttpUrlField,
    MarketSliceInput,
    StrictBooleanField,
    StrictInput,
    TextField,
    UuidField,
)
from markets.models import Brand, Site
from markets.producer import Generation
from markets.selectors import brand_get_for_caller, org_get_for_caller
from serenity.openapi import problem_response
from serenity.problems import PROBLEM_CONTENT_TYPE, NotFound, problem
from serenity.throttles import OnboardingRateThrottle, OrgMarketsRateThrottle
from tokens.exceptions import InvalidAudience, InvalidForwardedToken
from tokens.pairs import SEMRUSH, UnknownAudience, pair_from_audience
from tokens.services import promise_from_header
from tokens.types import InvalidPromiseToken

MAX_ACTIVATE_MARKETS = 50
# `semrush` in any case, as HTTP allows spaces around a header value.
AUDIENCE_PATTERN = r"^[ \t]*[Ss][Ee][Mm][Rr][Uu][Ss][Hh][ \t]*$"


class SiteNotFound(NotFound):
    code, title = "site_not_found", "Site not found"
# Per user, and per organization by the number of markets asked for (429 with Retry-After past either).
ONBOARDING_THROTTLES = [OnboardingRateThrottle, OrgMarketsRateThrottle]

AUDIENCE_HEADERS = [
    OpenApiParameter("x-promise-audience", {"type": "string", "pattern": AUDIENCE_PATTERN},
                     OpenApiParameter.HEADER, required=False,
                     description="`semrush` (any case) to delegate with the Semrush client pair (required for "
                                 "prompt generation); absent: the default pair. Anything else is a 400."),
    OpenApiParameter("x-promise-token", str, OpenApiParameter.HEADER, required=False,
                     description="A promise token forwarded by the browser, as the typed JSON object "
                                 "`{promise_token, token_type: \"promise_token\", expires_in}`, live at IMS and "
                                 "the caller's own (otherwise 400 `invalid_promise_token`). It serves the first "
                                 "new market of the request; every other one gets a token minted from the "
                                 "bearer, as do all when the header is absent."),
]


ERRORS = {
    (400, PROBLEM_CONTENT_TYPE): problem_response("Invalid body, header or path id; see `errors`."),
    (401, PROBLEM_CONTENT_TYPE): problem_response("Missing, invalid or expired bearer token."),
    (403, PROBLEM_CONTENT_TYPE): problem_response("Not a member of the organization, or Serenity is not active."),
    (404, PROBLEM_CONTENT_TYPE): problem_response("No such organization, brand or site for this caller."),
    (409, PROBLEM_CONTENT_TYPE): problem_response("Already exists, or the brand is not active yet."),
    (429, PROBLEM_CONTENT_TYPE): problem_response("Too many requests: retry after `Retry-After` seconds."),
    (502, PROBLEM_CONTENT_TYPE): problem_response("Semrush did not complete the request."),
}


class PromptGenerationHandle(serializers.Serializer):
    jobId = serializers.UUIDField()  # noqa: N815
    status = serializers.ChoiceField(choices=["provisioning"])
    reused = serializers.BooleanField()


class SyncPromptsOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=["written", "partial", "skipped", "empty", "failed"])
    written = serializers.IntegerField()


class MarketOutput(serializers.Serializer):
    id = serializers.UUIDField()
    market = serializers.CharField(source="country")
    languageCode = serializers.CharField(source="language_code")  # noqa: N815
    geoTargetId = serializers.IntegerField(source="geo_target_id")  # noqa: N815
    projectId = serializers.CharField(source="semrush_project_id", allow_null=True)  # noqa: N815
    publishState = serializers.CharField(source="publish_state")  # noqa: N815
    siteId = serializers.UUIDField(source="site_id", allow_null=True)  # noqa: N815
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815


class MarketCreatedOutput(MarketOutput):
    prompts = SyncPromptsOutput(required=False, help_text="Old synchronous path only: what was written.")
    promptGeneration = PromptGenerationHandle(required=False)  # noqa: N815


class BrandOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    displayName = serializers.CharField(source="display_name")  # noqa: N815
    domain = serializers.CharField()
    primaryUrl = serializers.CharField(source="primary_url")  # noqa: N815
    aliases = serializers.ListField(child=serializers.CharField())
    status = serializers.CharField()
    semrushWorkspaceId = serializers.CharField(source="semrush_workspace_id", allow_null=True)  # noqa: N815
    baseSiteId = serializers.UUIDField(source="base_site_id", allow_null=True)  # noqa: N815
    createdAt = serializers.DateTimeField(source="created_at")  # noqa: N815


def market_body(outcome: services.MarketOutcome) -> dict:
    if outcome.market is None:
        return outcome.problem
    body = dict(MarketOutput(outcome.market).data)
    if outcome.sync_prompts is not None:
        body["prompts"] = outcome.sync_prompts
    if outcome.prompt_generation is not None:
        body["promptGeneration"] = outcome.prompt_generation
    return body


def promise_headers(request) -> tuple:
    """The `x-promise-audience` pair and the shape-checked `x-promise-token` of a request (None when absent).
    Checked whenever they are sent, whatever else the request says: an unknown audience or a malformed
    token is a 400, never silently ignored."""
    try:
        pair = pair_from_audience(request.headers.get("x-promise-audience"))
    except UnknownAudience:
        raise InvalidAudience("x-promise-audience must be `semrush` or absent.") from None
    header = request.headers.get("x-promise-token")
    if header is not None:
        try:
            promise_from_header(header)
        except InvalidPromiseToken as exc:
            raise InvalidForwardedToken(str(exc)) from None
    return pair, header


def generation_for(request, generate_prompts: bool) -> Generation:
    """The async producer only with the flag on and `generatePrompts: true`; else the old path.

    The headers are checked first, before anything is created (400 for an unknown audience or a malformed
    token). For the producer, a forwarded token must also be one IMS vouches for: live, of the Semrush pair,
    the caller's own (400 `invalid_promise_token` otherwise).
    """
    pair, header = promise_headers(request)
    if not (services.async_generation_enabled() and generate_prompts):
        return Generation(use_async=False)
    forwarded = forwarded_token(request, pair, header) if pair.name == SEMRUSH else None
    return Generation(use_async=True, pair=pair, forwarded=forwarded)


class BrandCreateApi(APIView):
    throttle_classes = ONBOARDING_THROTTLES

    @extend_schema_serializer(component_name="CreateBrandInput")
    class InputSerializer(StrictInput):
        """A brand, with its first market when `semrushMarket` is given."""

        name = TextField(max_length=200)
        domain = DomainField()
        primaryUrl = HttpUrlField(required=False)  # noqa: N815
        aliases = serializers.ListField(child=TextField(max_length=200), required=False, max_length=20)
        semrushMarket = MarketSliceInput(required=False)  # noqa: N815
        generatePrompts = StrictBooleanField(required=False, default=False)  # noqa: N815

    @extend_schema_serializer(component_name="CreatedBrand")
    class OutputSerializer(BrandOutput):
        market = MarketCreatedOutput(required=False, help_text="The first market, when `semrushMarket` was given "
                                                               "(a problem document if it could not be made).")

    @extend_schema(operation_id="createBrand", request=InputSerializer, parameters=AUDIENCE_HEADERS,
                   responses={201: OutputSerializer, **ERRORS})
    def post(self, request, orgId):  # noqa: N803
        org = org_get_for_caller(request.user, orgId)
        services.require_serenity(org)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        generation = generation_for(request, v["generatePrompts"])
        brand = services.brand_create(caller=request.user, org=org, name=v["name"], domain=v["domain"],
                                      primary_url=v.get("primaryUrl", ""), aliases=v.get("aliases"))
        body = {}
        if "semrushMarket" in v:
            slice_ = v["semrushMarket"]
            try:
                services.brand_activate_workspace(caller=request.user, brand=brand)
            except services.SemrushUnavailable as exc:
                # The brand stands (pending); activating it later provisions the workspace and market.
                body["market"] = problem(exc.status, exc.code, exc.title, exc.detail)
            else:
                (outcome,) = services.markets_provision(
                    caller=request.user, brand=brand, generation=generation,
                    slices=[(slice_["market"], slice_["languageCode"], brand.base_site)])
                body["market"] = market_body(outcome)
        brand.refresh_from_db()
        return Response({**BrandOutput(brand).data, **body}, status=201)


class MarketCreateApi(APIView):
    throttle_classes = ONBOARDING_THROTTLES

    @extend_schema_serializer(component_name="CreateMarketInput")
    class InputSerializer(MarketSliceInput):
        """A market of the brand, optionally on one of its sites."""

        siteId = UuidField(required=False)  # noqa: N815
        generatePrompts = StrictBooleanField(required=False, default=False)  # noqa: N815

    @extend_schema(operation_id="createMarket", request=InputSerializer, parameters=AUDIENCE_HEADERS,
                   responses={201: MarketCreatedOutput, **ERRORS})
    def post(self, request, orgId, brandId):  # noqa: N803
        brand = brand_get_for_caller(request.user, orgId, brandId)
        services.require_serenity(brand.organization)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        site = brand.base_site
        if "siteId" in v:
            site = Site.objects.filter(Q(brand=brand) | Q(brand__isnull=True), id=v["siteId"],
                                       organization=brand.organization).first()
            if site is None:
                raise SiteNotFound()
        generation = generation_for(request, v["generatePrompts"])
        (outcome,) = services.markets_provision(caller=request.user, brand=brand, generation=generation,
                                                slices=[(v["market"], v["languageCode"], site)])
        return Response(market_body(outcome), status=outcome.status,
                        content_type=None if outcome.market else "application/problem+json")


class BrandActivateApi(APIView):
    throttle_classes = ONBOARDING_THROTTLES

    @extend_schema_serializer(component_name="ActivateMarketsInput")
    class InputSerializer(StrictInput):
        """The markets to create: 1 to 50, each distinct."""

        markets = serializers.ListField(child=MarketSliceInput(), min_length=1, max_length=MAX_ACTIVATE_MARKETS)
        generatePrompts = StrictBooleanField(required=False, default=False)  # noqa: N815

        def validate_markets(self, value):
            slices = [(m["market"], m["languageCode"]) for m in value]
            if len(set(slices)) != len(slices):
                raise serializers.ValidationError("Markets must be distinct.", code="duplicate_market")
            return value

    @extend_schema_serializer(component_name="Activation")
    class OutputSerializer(serializers.Serializer):
        brand = BrandOutput()
        markets = inline_serializer("ActivationEntry", many=True, fields={
            "market": serializers.CharField(),
            "languageCode": serializers.CharField(),
            "status": serializers.IntegerField(help_text="201 new market, 409 already live, 502 Semrush failed, "
                                                         "503 not attempted within the request's time budget "
                                                         "(retryable)"),
            "body": serializers.JSONField(help_text="The market (as createMarket) or a problem document"),
        })

    @extend_schema(operation_id="activateMarkets", request=InputSerializer, parameters=AUDIENCE_HEADERS,
                   responses={200: OutputSerializer, 207: OpenApiResponse(OutputSerializer, "Partial success"),
                              **ERRORS})
    def post(self, request, orgId, brandId):  # noqa: N803
        brand = brand_get_for_caller(request.user, orgId, brandId)
        services.require_serenity(brand.organization)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        generation = generation_for(request, v["generatePrompts"])
        if brand.status == Brand.Status.PENDING:
            services.brand_activate_workspace(caller=request.user, brand=brand)
            return Response({"brand": BrandOutput(brand).data, "markets": []}, status=200)
        outcomes = services.markets_provision(
            caller=request.user, brand=brand, generation=generation,
            slices=[(m["market"], m["languageCode"], brand.base_site) for m in v["markets"]])
        entries = [{"market": o.country, "languageCode": o.language_code, "status": o.status, "body": market_body(o)}
                   for o in outcomes]
        status = 200 if all(o.status == 201 for o in outcomes) else 207
        return Response({"brand": BrandOutput(brand).data, "markets": entries}, status=status)



