"""The onboarding routes: the entry points (SPEC §3: create a brand, create a market, activate a brand's
markets) and the UI's market journey around them (§3.1: list the brand's markets, read or delete one, the
wizard's catalogues of languages and AI models).

Thin views: scope the caller, read the body (markets/onboarding/inputs.py) or the path, call one service or
selector, render through its serializer (markets/onboarding/dto.py). The bodies and answers are the original
service's (its UI calls these), with this service's fields beside them. A path carries one view class, so a
path with two methods has one class with both.
"""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from markets.credentials import PromiseHeaders, require_semrush_credential, semrush_credential, semrush_generation
from markets.onboarding import schemas
from markets.onboarding.activation import brand_activate, markets_requested
from markets.onboarding.brands import FirstMarketFailed, brand_create, brand_semrush_work
from markets.onboarding.catalogues import languages_catalogue, models_catalogue
from markets.onboarding.deletion import market_delete
from markets.onboarding.dto import (
    ActivationOutput,
    BrandCreatedOutput,
    LanguageListOutput,
    MarketDetailOutput,
    MarketListOutput,
    ModelListOutput,
    market_dto,
)
from markets.onboarding.inputs import activate_request, brand_request, market_request
from markets.onboarding.provisioning import market_create
from markets.onboarding.reads import market_get_by_slice, markets_list
from markets.paths import parse_ids, parse_slice
from markets.selectors import org_get_for_caller, serenity_brand_get_for_caller
from serenity import limits
from serenity.problems import InvalidInput, problem_response


def json_object(request) -> dict:
    """The request body as a JSON object (an absent body is `{}`); anything else is a 400."""
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("The request body must be a JSON object.")
    return data


# --- Views -----------------------------------------------------------------------------------------------------


class BrandCreateApi(APIView):
    @extend_schema(**schemas.CREATE_BRAND)
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
                    request.user, promise, ims_org_id=org.ims_org_id, generate_prompts=brand_input.generate_prompts
                ) as generation:
                    created = brand_create(caller=request.user, org=org, request=brand_input, generation=generation)
            else:
                created = brand_create(caller=request.user, org=org, request=brand_input, generation=None)
        except FirstMarketFailed as failed:
            return problem_response(market_dto(failed.outcome))
        return Response(BrandCreatedOutput(created).data, status=201)


class MarketsApi(APIView):
    """The brand's markets: list them (listMarkets), create one (createMarket)."""

    @extend_schema(**schemas.LIST_MARKETS)
    def get(self, request, orgId, brandId):
        brand = serenity_brand_get_for_caller(request.user, *parse_ids(orgId=orgId, brandId=brandId), write=False)
        return Response(MarketListOutput({"items": markets_list(caller=request.user, brand=brand)}).data)

    @extend_schema(**schemas.CREATE_MARKET)
    def post(self, request, orgId, brandId):
        promise = PromiseHeaders.of(request.headers)
        require_semrush_credential(request.user, promise)
        brand = serenity_brand_get_for_caller(request.user, *parse_ids(orgId=orgId, brandId=brandId))
        market_input = market_request(json_object(request))
        limits.charge_entry_point(request.user, brand.organization_id, markets=1)
        with semrush_generation(
            request.user,
            promise,
            ims_org_id=brand.organization.ims_org_id,
            generate_prompts=market_input.generate_prompts,
        ) as generation:
            outcome = market_create(caller=request.user, brand=brand, request=market_input, generation=generation)
        if outcome.market is None:
            return problem_response(market_dto(outcome))
        return Response(market_dto(outcome), status=201)


class BrandActivateApi(APIView):
    @extend_schema(**schemas.ACTIVATE)
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
        with semrush_generation(
            request.user,
            promise,
            ims_org_id=brand.organization.ims_org_id,
            generate_prompts=activate_input.generate_prompts,
        ) as generation:
            activation = brand_activate(caller=request.user, brand=brand, request=activate_input, generation=generation)
        activation.brand.refresh_from_db()
        return Response(ActivationOutput(activation).data, status=activation.status)


class MarketSliceApi(APIView):
    """One market of the brand, by its slice: read it (getMarket), delete it (deleteMarket)."""

    @extend_schema(**schemas.GET_MARKET)
    def get(self, request, orgId, brandId, geoTargetId, languageCode):
        brand = serenity_brand_get_for_caller(request.user, *parse_ids(orgId=orgId, brandId=brandId), write=False)
        geo_target_id, language_code = parse_slice(geoTargetId, languageCode)
        market = market_get_by_slice(
            caller=request.user, brand=brand, geo_target_id=geo_target_id, language_code=language_code
        )
        return Response(MarketDetailOutput(market).data)

    @extend_schema(**schemas.DELETE_MARKET)
    def delete(self, request, orgId, brandId, geoTargetId, languageCode):
        promise = PromiseHeaders.of(request.headers)
        require_semrush_credential(request.user, promise)
        brand = serenity_brand_get_for_caller(request.user, *parse_ids(orgId=orgId, brandId=brandId))
        geo_target_id, language_code = parse_slice(geoTargetId, languageCode)
        with semrush_credential(request.user, promise, ims_org_id=brand.organization.ims_org_id) as credential:
            market_delete(
                caller=request.user,
                brand=brand,
                geo_target_id=geo_target_id,
                language_code=language_code,
                semrush_bearer=credential.semrush_bearer,
            )
        return Response(status=204)


class LanguagesApi(APIView):
    """The languages a market may be in: Semrush's catalogue, for the add-brand wizard (no brand yet)."""

    @extend_schema(**schemas.LIST_LANGUAGES)
    def get(self, request, orgId):
        promise = PromiseHeaders.of(request.headers)
        require_semrush_credential(request.user, promise)
        (org_id,) = parse_ids(orgId=orgId)
        org = org_get_for_caller(request.user, org_id, write=False)
        with semrush_credential(request.user, promise, ims_org_id=org.ims_org_id) as credential:
            languages = languages_catalogue(semrush_bearer=credential.semrush_bearer)
        return Response(LanguageListOutput({"items": languages}).data)


class ModelsApi(APIView):
    """The AI models a market may track: Semrush's global catalogue, for the add-brand wizard (no brand yet)."""

    @extend_schema(**schemas.LIST_MODELS)
    def get(self, request, orgId):
        promise = PromiseHeaders.of(request.headers)
        require_semrush_credential(request.user, promise)
        (org_id,) = parse_ids(orgId=orgId)
        org = org_get_for_caller(request.user, org_id, write=False)
        with semrush_credential(request.user, promise, ims_org_id=org.ims_org_id) as credential:
            models = models_catalogue(semrush_bearer=credential.semrush_bearer)
        return Response(ModelListOutput({"items": models}).data)
