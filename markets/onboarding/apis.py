"""The onboarding entry points (SPEC §3): create a brand, create a market, activate a brand's markets.

Thin views: scope the caller, read the body (markets/onboarding/inputs.py), call one service, render. The
bodies and answers are the original service's (its UI calls these), with this service's fields beside them.
"""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from markets.credentials import PromiseHeaders, require_semrush_credential, semrush_generation
from markets.onboarding import schemas
from markets.onboarding.activation import brand_activate, markets_requested
from markets.onboarding.brands import FirstMarketFailed, brand_create, brand_semrush_work
from markets.onboarding.dto import ActivationOutput, BrandCreatedOutput, market_dto
from markets.onboarding.inputs import activate_request, brand_request, market_request
from markets.onboarding.provisioning import market_create
from markets.paths import parse_ids
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
                    request.user, promise, generate_prompts=brand_input.generate_prompts
                ) as generation:
                    created = brand_create(caller=request.user, org=org, request=brand_input, generation=generation)
            else:
                created = brand_create(caller=request.user, org=org, request=brand_input, generation=None)
        except FirstMarketFailed as failed:
            return problem_response(market_dto(failed.outcome))
        return Response(BrandCreatedOutput(created).data, status=201)


class MarketCreateApi(APIView):
    @extend_schema(**schemas.CREATE_MARKET)
    def post(self, request, orgId, brandId):
        promise = PromiseHeaders.of(request.headers)
        require_semrush_credential(request.user, promise)
        brand = serenity_brand_get_for_caller(request.user, *parse_ids(orgId=orgId, brandId=brandId))
        market_input = market_request(json_object(request))
        limits.charge_entry_point(request.user, brand.organization_id, markets=1)
        with semrush_generation(request.user, promise, generate_prompts=market_input.generate_prompts) as generation:
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
        with semrush_generation(request.user, promise, generate_prompts=activate_input.generate_prompts) as generation:
            activation = brand_activate(caller=request.user, brand=brand, request=activate_input, generation=generation)
        activation.brand.refresh_from_db()
        return Response(ActivationOutput(activation).data, status=activation.status)
