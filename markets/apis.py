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

from markets import geo, services
from markets.models import Brand, Site
from markets.producer import Generation
from markets.selectors import brand_get_for_caller, org_get_for_caller
from serenity.openapi import ProblemSerializer
from serenity.problems import problem
from serenity.throttles import OnboardingRateThrottle, OrgMarketsRateThrottle
from tokens.exceptions import InvalidAudience, InvalidForwardedToken
from tokens.pairs import SEMRUSH, UnknownAudience, pair_from_audience
from tokens.services import promise_accept_forwarded, promise_from_header
from tokens.types import InvalidPromiseToken

MAX_ACTIVATE_MARKETS = 50
# Per user, and per organization by the number of markets asked for (429 with Retry-After past either).
ONBOARDING_THROTTLES = [OnboardingRateThrottle, OrgMarketsRateThrottle]

AUDIENCE_HEADERS = [
    OpenApiParameter("x-promise-audience", str, OpenApiParameter.HEADER, required=False,
                     description="`semrush` to delegate with the Semrush client pair "
                                 "(required for prompt generation)."),
    OpenApiParameter("x-promise-token", str, OpenApiParameter.HEADER, required=False,
                     description="A promise token forwarded by the browser, as the typed JSON object "
                                 "`{promise_token, token_type: \"promise_token\", expires_in}`, live at IMS and "
                                 "the caller's own (otherwise 400 `invalid_promise_token`). It serves the first "
                                 "new market of the request; every other one gets a token minted from the "
                                 "bearer, as do all when the header is absent."),
]


PROBLEM = OpenApiResponse(ProblemSerializer, "A problem document (application/problem+json)")
ERRORS = {400: PROBLEM, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM, 429: PROBLEM}


class StrictInput(serializers.Serializer):
    """Rejects fields it does not declare, instead of silently ignoring them."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown}, code="unknown_field")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean, nothing else ("true", 1 and friends are refused)."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class CodeField(serializers.CharField):
    """A code normalised (`upper`/`lower`) and then checked against the ISO library."""

    def __init__(self, *, case: str, is_valid, message: str, error_code: str, **kwargs):
        super().__init__(**kwargs)
        self.case, self.is_valid, self.message, self.error_code = case, is_valid, message, error_code

    def to_internal_value(self, data):
        value = getattr(super().to_internal_value(data).strip(), self.case)()
        if not self.is_valid(value):
            raise serializers.ValidationError(self.message, code=self.error_code)
        return value


def CountryField(**kwargs):  # noqa: N802  (reads as a field class where it is used)
    return CodeField(case="upper", is_valid=geo.is_country, message="Not an ISO 3166-1 alpha-2 country code.",
                     error_code="invalid_country", max_length=2, **kwargs)


def LanguageField(**kwargs):  # noqa: N802
    return CodeField(case="lower", is_valid=geo.is_language, message="Not an ISO 639-1 language code.",
                     error_code="invalid_language", max_length=2, **kwargs)


class MarketSliceInput(StrictInput):
    market = CountryField(help_text="ISO 3166-1 alpha-2 country code, e.g. FR")
    languageCode = LanguageField(help_text="ISO 639-1 language code, e.g. fr")  # noqa: N815


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


def generation_for(request, generate_prompts: bool) -> Generation:
    """The async producer only with the flag on and `generatePrompts: true`; else the old path.

    Only then do the headers matter, and they are checked before anything is created: an unknown
    `x-promise-audience` is a 400, and so is an `x-promise-token` that is malformed, claims a lifetime IMS
    never gives, or that IMS says is not a live token of this caller for the Semrush pair.
    """
    if not (services.async_generation_enabled() and generate_prompts):
        return Generation(use_async=False)
    try:
        pair = pair_from_audience(request.headers.get("x-promise-audience"))
    except UnknownAudience:
        raise InvalidAudience("x-promise-audience must be `semrush` or absent.") from None
    header = request.headers.get("x-promise-token")
    forwarded = None
    try:
        if header is not None and pair.name == SEMRUSH:
            forwarded = promise_accept_forwarded(value=header, user_id=request.user.user_id, pair=pair)
        elif header is not None:
            promise_from_header(header)  # unused without the Semrush pair, but still not accepted malformed
    except InvalidPromiseToken as exc:
        raise InvalidForwardedToken(str(exc)) from None
    return Generation(use_async=True, pair=pair, forwarded=forwarded)


class BrandCreateApi(APIView):
    throttle_classes = ONBOARDING_THROTTLES

    @extend_schema_serializer(component_name="CreateBrandInput")
    class InputSerializer(StrictInput):
        name = serializers.CharField(max_length=200)
        domain = serializers.RegexField(r"^(?=.{1,253}$)([a-zA-Z0-9-]{1,63}\.)+[a-zA-Z]{2,63}$", max_length=253)
        primaryUrl = serializers.URLField(required=False, allow_blank=True, max_length=2000)  # noqa: N815
        aliases = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=20)
        semrushMarket = MarketSliceInput(required=False)  # noqa: N815
        generatePrompts = StrictBooleanField(required=False, default=False)  # noqa: N815

    @extend_schema_serializer(component_name="CreatedBrand")
    class OutputSerializer(BrandOutput):
        market = MarketCreatedOutput(required=False, help_text="The first market, when `semrushMarket` was given "
                                                               "(a problem document if it could not be made).")

    @extend_schema(operation_id="createBrand", request=InputSerializer, parameters=AUDIENCE_HEADERS,
                   responses={201: OutputSerializer, 409: PROBLEM, **ERRORS})
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
        siteId = serializers.UUIDField(required=False)  # noqa: N815
        generatePrompts = StrictBooleanField(required=False, default=False)  # noqa: N815

    @extend_schema(operation_id="createMarket", request=InputSerializer, parameters=AUDIENCE_HEADERS,
                   responses={201: MarketCreatedOutput, 409: PROBLEM, 502: PROBLEM, **ERRORS})
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
                raise serializers.ValidationError({"siteId": ["No such site for this brand."]}, code="unknown_site")
        generation = generation_for(request, v["generatePrompts"])
        (outcome,) = services.markets_provision(caller=request.user, brand=brand, generation=generation,
                                                slices=[(v["market"], v["languageCode"], site)])
        return Response(market_body(outcome), status=outcome.status,
                        content_type=None if outcome.market else "application/problem+json")


class BrandActivateApi(APIView):
    throttle_classes = ONBOARDING_THROTTLES

    @extend_schema_serializer(component_name="ActivateMarketsInput")
    class InputSerializer(StrictInput):
        markets = MarketSliceInput(many=True, allow_empty=False, max_length=MAX_ACTIVATE_MARKETS)
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
                              409: PROBLEM, 502: PROBLEM, **ERRORS})
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



