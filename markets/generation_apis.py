"""HTTP interface of generation jobs: poll a job, and re-authorise one that awaits a fresh credential (SPEC §7).

Both views read the job through `job_get_for_caller`, the one scoping rule of the product, so any job the
caller may not see answers exactly like a job that does not exist.
"""
import hashlib
import logging
import uuid

from django.http import HttpResponse, HttpResponseNotModified
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status as http
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import services as job_services
from jobs.models import AsyncJob, JobStatus
from markets import constants
from markets.dto import JOB_DTO_FIELDS, GenerationJobSerializer, ReauthAcceptedSerializer, job_dto, reauth_accepted
from markets.headers import promise_token_header, semrush_pair
from markets.selectors import JobNotFound, job_get_for_caller
from serenity import limits
from serenity.clients.http import ClientError
from serenity.openapi import problem_response
from serenity.problems import PROBLEM_CONTENT_TYPE, InvalidInput
from tokens.delegation import forwarded_promise, request_credential, require_promise_token
from tokens.exceptions import CredentialUnavailable, InvalidForwardedToken
from tokens.services import promise_mint
from tokens.types import InvalidPromiseToken

log = logging.getLogger(__name__)

GENERATION_JOB_TYPES = (constants.MARKET_GENERATION_JOB_TYPE,)

# How long a poller should wait before asking again, by the phase the job last reached. Generation is one
# DRS call of up to 300 s, so polling it every other second only burns requests; writing and publishing
# take seconds, so the UI should notice the end quickly.
RETRY_AFTER_SECONDS = {
    constants.PHASE_QUEUED: 10,
    constants.PHASE_GENERATING: 15,
    constants.PHASE_GENERATED: 5,
    constants.PHASE_WRITING: 3,
    constants.PHASE_WRITTEN: 2,
    constants.PHASE_PUBLISHED: 2,
}
DEFAULT_RETRY_AFTER_SECONDS = 5


def retry_after_seconds(phase: str) -> int:
    return RETRY_AFTER_SECONDS.get(phase, DEFAULT_RETRY_AFTER_SECONDS)


# What a malformed path id is told, as the original's router says it.
ID_MESSAGES = {
    "orgId": "Organization Id (spaceCatId) is invalid. Please provide a valid UUID.",
    "brandId": "Brand Id is invalid. Please provide a valid UUID.",
    "jobId": "Job Id is invalid. Please provide a valid UUID.",
    "marketId": "Market Id is invalid. Please provide a valid UUID.",
}


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


def etag_for(content: bytes) -> str:
    """A strong validator over the exact bytes served: any visible change (status, updatedAt, a public
    message) changes it, and nothing invisible does."""
    return '"' + hashlib.sha256(content).hexdigest()[:32] + '"'


def if_none_match(header: str | None, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison against a list of entity tags, or `*`."""
    if not header:
        return False
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or etag in {tag.removeprefix("W/") for tag in tags}


# --- OpenAPI description -----------------------------------------------------------------------------

PATH_IDS = [
    OpenApiParameter("orgId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The organization."),
    OpenApiParameter("brandId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="A brand of the organization."),
    OpenApiParameter("jobId", OpenApiTypes.UUID, OpenApiParameter.PATH,
                     description="The job id from `promptGeneration.jobId` of an entry point's response."),
]
COMMON_PROBLEMS = {
    (400, PROBLEM_CONTENT_TYPE): problem_response("A path id is not a UUID."),
    (401, PROBLEM_CONTENT_TYPE): problem_response("Missing, invalid or expired bearer token."),
    (404, PROBLEM_CONTENT_TYPE): problem_response(
        "No such job for this caller: missing, of another organization, brand or site, or of another type. "
        "Every case answers the same body."
    ),
}
POLL_RESPONSE_HEADERS = [
    OpenApiParameter("ETag", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200, 304], required=True,
                     description="Validator of this representation; send it back in If-None-Match."),
    OpenApiParameter("Retry-After", OpenApiTypes.INT, OpenApiParameter.HEADER, response=[200, 304],
                     description="While the job is IN_PROGRESS: seconds to wait before polling again "
                                 "(longer while generating, shorter while writing)."),
]


# --- Views -------------------------------------------------------------------------------------------

class GenerationJobDetailApi(APIView):
    """Poll a generation job. Reads one row; never calls anything external."""

    @extend_schema(
        operation_id="getGenerationJob",
        summary="Poll a prompt generation job",
        tags=["generation jobs"],
        parameters=[
            *PATH_IDS,
            OpenApiParameter("If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER,
                             description="The ETag of the last response; 304 when nothing changed."),
            *POLL_RESPONSE_HEADERS,
        ],
        responses={
            200: OpenApiResponse(
                response=GenerationJobSerializer, description="The job.",
                examples=[
                    OpenApiExample("provisioning", value={
                        "jobId": "fb4b4490-6cba-43ac-87bb-42249acaac23", "jobType": "generateSemrushMarket",
                        "status": "IN_PROGRESS", "result": None, "error": None,
                        "createdAt": "2026-01-05T10:00:00Z", "updatedAt": "2026-01-05T10:00:12Z"}),
                    OpenApiExample("authorization required", value={
                        "jobId": "fb4b4490-6cba-43ac-87bb-42249acaac23", "jobType": "generateSemrushMarket",
                        "status": "FAILED", "result": None,
                        "error": {"code": "NEEDS_REAUTH",
                                  "message": "Authorisation to write to Semrush has expired. Re-authorise to continue.",
                                  "retryable": False, "needsReauth": True},
                        "createdAt": "2026-01-05T10:00:00Z", "updatedAt": "2026-01-05T10:03:40Z"}),
                ],
            ),
            304: OpenApiResponse(description="Not modified since the ETag in If-None-Match (no body)."),
            **COMMON_PROBLEMS,
        },
    )
    def get(self, request, orgId: str, brandId: str, jobId: str):
        org_id, brand_id, job_id = parse_ids(orgId=orgId, brandId=brandId, jobId=jobId)
        job = job_get_for_caller(caller=request.user, org_id=org_id, brand_id=brand_id, job_id=job_id,
                                 allowed_types=GENERATION_JOB_TYPES, fields=JOB_DTO_FIELDS)
        # Rendered once: the same bytes are hashed for the ETag and served.
        content = JSONRenderer().render(job_dto(job))
        etag = etag_for(content)
        # Private: the body is per caller. no-cache: any cache must revalidate, which If-None-Match makes cheap.
        headers = {"ETag": etag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
        if job.status == JobStatus.IN_PROGRESS:
            headers["Retry-After"] = str(retry_after_seconds(job.phase))
        if if_none_match(request.headers.get("If-None-Match"), etag):
            not_modified = HttpResponseNotModified()
            for name, value in headers.items():
                not_modified[name] = value
            return not_modified
        return HttpResponse(content, content_type="application/json", headers=headers)


class GenerationJobReauthApi(APIView):
    """Give a job awaiting re-authorisation a fresh credential and queue the same job again."""

    @extend_schema(
        operation_id="reauthorizeGenerationJob",
        summary="Re-authorise a prompt generation job",
        description=(
            "Only for a job that is `FAILED` with `NEEDS_REAUTH`, and only by the user who started it (by the IMS "
            "`user_id`, or a session token's `sub`). The credential is the promise token IMS rotates for the "
            "forwarded `x-promise-token` (the caller's own; 401 `Invalid or expired promise token` otherwise), or one "
            "minted from the caller's IMS bearer; a session-token caller must send the header (401 "
            "`PROMISE_TOKEN_REQUIRED`). Of concurrent calls exactly one wins; the others get 409 at once and obtain "
            "nothing. "
            "If IMS does not issue the credential the job stays `FAILED` `NEEDS_REAUTH` (502). Limited per user and "
            "per organization (429 with `Retry-After`)."
        ),
        tags=["generation jobs"],
        request=None,
        parameters=[
            *PATH_IDS,
            OpenApiParameter("x-promise-audience", OpenApiTypes.STR, OpenApiParameter.HEADER, required=True,
                             enum=["semrush"], description="The IMS client pair: must be `semrush`."),
            OpenApiParameter("x-promise-token", OpenApiTypes.STR, OpenApiParameter.HEADER,
                             description="A promise token the browser holds, bare or as the typed JSON object "
                                         "`{promise_token, token_type, expires_in}`: exchanged at IMS, the job "
                                         "gets the rotated token. Absent: one is minted from the IMS bearer."),
        ],
        responses={
            202: OpenApiResponse(response=ReauthAcceptedSerializer,
                                 description="Accepted: the same job id is queued again."),
            (400, PROBLEM_CONTENT_TYPE): problem_response(
                "A path id is not a UUID, x-promise-audience is not `semrush`, or x-promise-token is malformed."
            ),
            (401, PROBLEM_CONTENT_TYPE): problem_response(
                "Missing, invalid or expired bearer token; a promise token IMS did not exchange; or a session-token "
                "caller without x-promise-token (`PROMISE_TOKEN_REQUIRED`)."),
            (403, PROBLEM_CONTENT_TYPE): problem_response("The caller is not the user who started the job."),
            (404, PROBLEM_CONTENT_TYPE): COMMON_PROBLEMS[(404, PROBLEM_CONTENT_TYPE)],
            (409, PROBLEM_CONTENT_TYPE): problem_response("The job is not awaiting re-authorisation, or another "
                                                  "re-authorisation of it is under way."),
            (429, PROBLEM_CONTENT_TYPE): problem_response("Too many re-authorisations by this user or of this "
                                                          "organization: retry after `Retry-After` seconds."),
            (502, PROBLEM_CONTENT_TYPE): problem_response("IMS did not issue a credential; the job still awaits "
                                                  "re-authorisation."),
        },
    )
    def post(self, request, orgId: str, brandId: str, jobId: str):
        org_id, brand_id, job_id = parse_ids(orgId=orgId, brandId=brandId, jobId=jobId)
        pair = semrush_pair(request, purpose="Re-authentication")
        caller = request.user
        header = promise_token_header(request)
        require_promise_token(caller, header)
        job = job_get_for_caller(caller=caller, org_id=org_id, brand_id=brand_id, job_id=job_id,
                                 allowed_types=GENERATION_JOB_TYPES)
        forwarded_promise(header)  # a malformed typed token is refused before anything else happens
        # Charged once the caller may see the job: a stranger never spends anyone's budget.
        limits.charge_user(limits.REAUTH, caller)
        limits.charge_org(limits.ORG_REAUTH, job.organization_id)

        def obtain_token():
            # Runs only for the one call that won the claim, outside any transaction: the promise token IMS
            # rotated for the forwarded one, or one minted from the caller's IMS bearer.
            credential = request_credential(caller=caller, header=header, pair=pair)
            return credential.take_promise() or promise_mint(bearer=credential.mint_bearer, pair=pair)

        try:
            job = job_services.job_reauthorize(job_id=job.id, user_id=caller.user_id, pair=pair,
                                               obtain_token=obtain_token)
        except ClientError as exc:
            # The claim was given back: the job still awaits re-authorisation.
            log.warning("re-authorisation credential not issued",
                        extra={"job_id": str(job_id), "reason": type(exc).__name__, "status": exc.status})
            raise CredentialUnavailable("The job still awaits re-authorisation; try again.") from None
        except InvalidPromiseToken as exc:
            raise InvalidForwardedToken(str(exc)) from None
        except AsyncJob.DoesNotExist:
            # Purged between the scoped read and the row lock.
            raise JobNotFound() from None
        return Response(reauth_accepted(job), status=http.HTTP_202_ACCEPTED)
