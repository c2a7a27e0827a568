"""HTTP interface of generation jobs: poll a job, at once or waiting for it to change, and re-authorise one that
awaits a fresh credential (SPEC §7); regenerate a market's prompts (SPEC §12). Each view parses its request (path
ids, promise headers, `?wait`), checks the caller's credential where Semrush will be reached, reads what it names
through the scoping rule, then answers: the poll renders the job, waiting through markets/generation/waiting.py;
re-authorisation and regeneration call one service each, regeneration once it has charged the entry point's
limits (re-authorisation's are charged by its service). Their OpenAPI descriptions are in
markets/generation/schemas.py.

Poll and re-authorisation read the job through `job_get_for_caller`, the one scoping rule of the product, so
any job the caller may not see answers exactly like a job that does not exist. Regeneration is scoped and
gated like the entry points; a market that does not exist and one of another brand answer the same 404.
"""

from django.conf import settings
from django.http import HttpResponse, HttpResponseNotModified
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import status as http
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.models import JobStatus
from markets.credentials import PromiseHeaders, require_semrush_credential, semrush_generation, semrush_pair
from markets.generation import jobtype, schemas, services, waiting
from markets.generation.dto import JOB_DTO_FIELDS, job_dto, reauth_accepted, regeneration_accepted
from markets.generation.selectors import job_get_for_caller
from markets.paths import parse_ids
from markets.selectors import serenity_brand_get_for_caller
from serenity import limits
from serenity.problems import InvalidInput
from tokens.delegation import require_promise_token

GENERATION_JOB_TYPES = (jobtype.MARKET_GENERATION_JOB_TYPE,)

# How long a poller should wait before asking again, by the phase the job last reached. Generation is one
# DRS call of up to DRS_TIMEOUT_SECONDS, so polling it every other second only burns requests; writing and publishing
# take seconds, so the UI should notice the end quickly.
RETRY_AFTER_SECONDS = {
    jobtype.PHASE_QUEUED: 10,
    jobtype.PHASE_GENERATING: 15,
    jobtype.PHASE_GENERATED: 5,
    jobtype.PHASE_WRITING: 3,
    jobtype.PHASE_WRITTEN: 2,
    jobtype.PHASE_PUBLISHED: 2,
}
DEFAULT_RETRY_AFTER_SECONDS = 5


def retry_after_seconds(phase: str) -> int:
    return RETRY_AFTER_SECONDS.get(phase, DEFAULT_RETRY_AFTER_SECONDS)


def parse_wait(request) -> int:
    """`?wait=N`: whole seconds from 0 to POLL_WAIT_MAX_SECONDS (0 or absent: answer at once). Else 400."""
    text = request.query_params.get("wait")
    if text is None or text == "":
        return 0
    limit = settings.POLL_WAIT_MAX_SECONDS
    if not (text.isascii() and text.isdigit() and len(text) <= 3) or int(text) > limit:
        message = f"wait must be a whole number of seconds from 0 to {limit}."
        raise InvalidInput(message, errors=[{"parameter": "wait", "code": "invalid_wait", "message": message}])
    return int(text)


class GenerationJobDetailApi(APIView):
    """Poll a generation job, at once or waiting for it to change (`?wait=N` with If-None-Match). Reads one row
    per look; never calls anything external; holds no database connection while it waits."""

    @extend_schema(**schemas.POLL)
    def get(self, request, orgId: str, brandId: str, jobId: str):
        org_id, brand_id, job_id = parse_ids(orgId=orgId, brandId=brandId, jobId=jobId)
        wait = parse_wait(request)
        known = request.headers.get("If-None-Match")

        def look() -> tuple[bytes, dict[str, str], str]:
            # The scoping rule on every look: absent and not-yours answer the same 404, at once, before any wait.
            job = job_get_for_caller(
                caller=request.user,
                org_id=org_id,
                brand_id=brand_id,
                job_id=job_id,
                allowed_types=GENERATION_JOB_TYPES,
                fields=JOB_DTO_FIELDS,
            )
            # Rendered once: the same bytes are hashed for the ETag and served.
            content = JSONRenderer().render(job_dto(job))
            # Private: the body is per caller. no-cache: any cache must revalidate, which If-None-Match makes cheap.
            headers = {"ETag": waiting.etag_for(content), "Cache-Control": "private, no-cache", "Vary": "Authorization"}
            if job.status == JobStatus.IN_PROGRESS:
                headers["Retry-After"] = str(retry_after_seconds(job.phase))
            return content, headers, job.status

        content, headers = waiting.look_or_wait(
            job_id, look, known=known, wait=wait, user_id=request.user.user_id, org_id=str(org_id)
        )
        if waiting.if_none_match(known, headers["ETag"]):
            not_modified = HttpResponseNotModified()
            for name, value in headers.items():
                not_modified[name] = value
            return not_modified
        return HttpResponse(content, content_type="application/json", headers=headers)


class GenerationJobReauthApi(APIView):
    """Give a job awaiting re-authorisation a fresh credential and queue the same job again."""

    @extend_schema(**schemas.REAUTHORIZE)
    def post(self, request, orgId: str, brandId: str, jobId: str):
        org_id, brand_id, job_id = parse_ids(orgId=orgId, brandId=brandId, jobId=jobId)
        promise = PromiseHeaders.of(request.headers)
        pair = semrush_pair(promise, purpose="Re-authentication")
        require_promise_token(request.user, promise.token)
        job = job_get_for_caller(
            caller=request.user, org_id=org_id, brand_id=brand_id, job_id=job_id, allowed_types=GENERATION_JOB_TYPES
        )
        job = services.generation_job_reauthorize(caller=request.user, job=job, header=promise.token, pair=pair)
        return Response(reauth_accepted(job), status=http.HTTP_202_ACCEPTED)


class MarketRegenerateApi(APIView):
    """Queue the generation job of an existing market again."""

    @extend_schema(**schemas.REGENERATE)
    def post(self, request, orgId: str, brandId: str, marketId: str):
        org_id, brand_id, market_id = parse_ids(orgId=orgId, brandId=brandId, marketId=marketId)
        promise = PromiseHeaders.of(request.headers)
        pair = semrush_pair(promise, purpose="Regeneration")
        require_semrush_credential(request.user, promise)
        brand = serenity_brand_get_for_caller(request.user, org_id, brand_id)
        limits.charge_entry_point(request.user, brand.organization_id, markets=1)  # once the brand is in sight
        with semrush_generation(
            request.user,
            promise,
            ims_org_id=brand.organization.ims_org_id,
            generate_prompts=True,
            pair=pair,
            use_async=True,
        ) as generation:
            handle = services.market_regenerate(
                caller=request.user, brand=brand, market_id=market_id, generation=generation
            )
        poll = reverse(
            "generation-job-detail", kwargs={"orgId": str(org_id), "brandId": str(brand_id), "jobId": handle["jobId"]}
        )
        return Response(
            regeneration_accepted(handle),
            status=http.HTTP_202_ACCEPTED,
            headers={"Location": request.build_absolute_uri(poll)},
        )
