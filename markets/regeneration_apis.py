"""HTTP interface of regeneration: generate a market's prompts again (SPEC §12).

Scoped and gated like the entry points: the caller's organization and brand, Serenity active, the brand
active, the flag, readiness. A market that does not exist and one of another brand answer the same 404.
"""
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework import status as http
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.models import JobStatus
from markets import services
from markets.constants import MARKET_GENERATION_JOB_TYPE
from markets.generation_apis import parse_ids
from markets.headers import require_semrush_credential, semrush_generation, semrush_pair
from markets.selectors import serenity_brand_get_for_caller
from serenity import limits
from serenity.openapi import problem_response
from serenity.problems import PROBLEM_CONTENT_TYPE


class RegenerationAcceptedSerializer(serializers.Serializer):
    """The 202 of a regeneration: the market's generation job, queued (or already running: `reused`)."""

    jobId = serializers.UUIDField()
    jobType = serializers.ChoiceField(choices=[MARKET_GENERATION_JOB_TYPE])
    status = serializers.ChoiceField(choices=[JobStatus.IN_PROGRESS.value])
    reused = serializers.BooleanField(help_text="True when a job of this market was already running: nothing "
                                                "new was queued, poll that job.")


class MarketRegenerateApi(APIView):
    """Queue the generation job of an existing market again."""

    @extend_schema(
        operation_id="regenerateMarketPrompts",
        summary="Generate a market's prompts again",
        description=(
            "For a market whose generation failed (held, gate error, empty, retries exhausted, enqueue failed, "
            "needs re-auth) or completed. The one shared producer runs for the market with seeds read afresh from "
            "the catalogue, under the market's deterministic job id: a running job is reused (`reused: true`, "
            "nothing minted), a finished one replaced. New prompts are added to the Semrush project; prompts it "
            "already holds are neither written twice nor removed."
        ),
        tags=["generation jobs"],
        request=None,
        parameters=[
            OpenApiParameter("orgId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The organization."),
            OpenApiParameter("brandId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The brand."),
            OpenApiParameter("marketId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The market."),
            OpenApiParameter("x-promise-audience", OpenApiTypes.STR, OpenApiParameter.HEADER, required=True,
                             enum=["semrush"], description="The IMS client pair: must be `semrush`."),
            OpenApiParameter("x-promise-token", OpenApiTypes.STR, OpenApiParameter.HEADER,
                             description="A promise token the browser holds (see createMarket): exchanged at IMS; "
                                         "required for a session-token caller. Absent: the IMS bearer."),
            OpenApiParameter("Location", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[202],
                             description="The job's poll URL."),
        ],
        responses={
            202: OpenApiResponse(RegenerationAcceptedSerializer, "Queued (or already running)."),
            (400, PROBLEM_CONTENT_TYPE): problem_response("An id is not a UUID, or a header is unusable."),
            (401, PROBLEM_CONTENT_TYPE): problem_response("Missing, invalid or expired bearer token."),
            (403, PROBLEM_CONTENT_TYPE): problem_response("Not a member of the organization, or Serenity is not "
                                                          "active for it."),
            (404, PROBLEM_CONTENT_TYPE): problem_response("No such organization, brand or market for this caller."),
            (409, PROBLEM_CONTENT_TYPE): problem_response("Generation disabled, brand not active, or nothing in the "
                                                          "catalogue to generate from."),
            (429, PROBLEM_CONTENT_TYPE): problem_response("Too many requests: retry after `Retry-After` seconds."),
            (502, PROBLEM_CONTENT_TYPE): problem_response("Semrush or IMS did not answer."),
            (503, PROBLEM_CONTENT_TYPE): problem_response("No worker ready, or the queue refused the job: retry "
                                                          "after `Retry-After` seconds."),
        },
    )
    def post(self, request, orgId: str, brandId: str, marketId: str):
        org_id, brand_id, market_id = parse_ids(orgId=orgId, brandId=brandId, marketId=marketId)
        pair = semrush_pair(request, purpose="Regeneration")
        require_semrush_credential(request)
        brand = serenity_brand_get_for_caller(request.user, org_id, brand_id)
        limits.charge_entry_point(request.user, brand.organization_id, markets=1)  # once the brand is in sight
        with semrush_generation(request, generate_prompts=True, pair=pair, use_async=True) as generation:
            handle = services.market_regenerate(caller=request.user, brand=brand, market_id=market_id,
                                                generation=generation)
        poll = reverse("generation-job-detail", kwargs={"orgId": str(org_id), "brandId": str(brand_id),
                                                        "jobId": handle["jobId"]})
        body = {"jobId": handle["jobId"], "jobType": MARKET_GENERATION_JOB_TYPE,
                "status": JobStatus.IN_PROGRESS.value, "reused": handle["reused"]}
        return Response(body, status=http.HTTP_202_ACCEPTED, headers={"Location": request.build_absolute_uri(poll)})
