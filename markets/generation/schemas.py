"""The OpenAPI description of the generation routes: polling and re-authorisation (SPEC §7), regeneration
(SPEC §12). Kept beside the views so each view reads as what it does."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse

from markets.generation.dto import GenerationJobSerializer, ReauthAcceptedSerializer, RegenerationAcceptedSerializer
from markets.openapi import MARKET_ID, PATH_IDS, SEMRUSH_AUDIENCE, promise_token_parameter
from serenity.openapi import problem_described
from serenity.problems import PROBLEM_CONTENT_TYPE

COMMON_PROBLEMS = {
    (400, PROBLEM_CONTENT_TYPE): problem_described("A path id is not a UUID (or, on the poll, `wait` is not 0-25)."),
    (401, PROBLEM_CONTENT_TYPE): problem_described("Missing, invalid or expired bearer token."),
    (404, PROBLEM_CONTENT_TYPE): problem_described(
        "No such job for this caller: missing, of another organization, brand or site, or of another type. "
        "Every case answers the same body."
    ),
}
POLL_RESPONSE_HEADERS = [
    OpenApiParameter(
        "ETag",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        response=[200, 304],
        required=True,
        description="Validator of this representation; send it back in If-None-Match.",
    ),
    OpenApiParameter(
        "Retry-After",
        OpenApiTypes.INT,
        OpenApiParameter.HEADER,
        response=[200, 304],
        description="While the job is IN_PROGRESS: seconds to wait before polling again "
        "(longer while generating, shorter while writing).",
    ),
]


# Keyword arguments of extend_schema, one set per view.
POLL: dict[str, Any] = dict(
    operation_id="getGenerationJob",
    summary="Poll a prompt generation job",
    description=(
        "Answers at once by default. With `wait=N` and `If-None-Match` naming the current answer's ETag, it waits "
        "up to N seconds for the job to change: 200 with the new body and ETag as soon as it changes (woken by the "
        "database at the change's commit), or 304 with the same ETag at the end of the wait; send the next wait at "
        "once. A job the caller may not see answers the same 404 at once, never after a wait. A UI that cannot "
        "wait polls plainly, at the pace of `Retry-After`."
    ),
    tags=["generation jobs"],
    parameters=[
        *PATH_IDS,
        OpenApiParameter(
            "wait",
            {"type": "integer", "minimum": 0, "maximum": 25},
            OpenApiParameter.QUERY,
            description="Seconds to wait for a change of the job from the ETag in If-None-Match (0 to 25; 0 or "
            "absent: answer at once). Without If-None-Match it answers at once. Anything else is a 400.",
        ),
        OpenApiParameter(
            "If-None-Match",
            OpenApiTypes.STR,
            OpenApiParameter.HEADER,
            description="The ETag of the last response; 304 when nothing changed (after the wait, with `wait`).",
        ),
        *POLL_RESPONSE_HEADERS,
    ],
    responses={
        200: OpenApiResponse(
            response=GenerationJobSerializer,
            description="The job.",
            examples=[
                OpenApiExample(
                    "provisioning",
                    value={
                        "jobId": "fb4b4490-6cba-43ac-87bb-42249acaac23",
                        "jobType": "generateSemrushMarket",
                        "status": "IN_PROGRESS",
                        "result": None,
                        "error": None,
                        "createdAt": "2026-01-05T10:00:00Z",
                        "updatedAt": "2026-01-05T10:00:12Z",
                        "progress": {"phase": "generating", "step": 2, "steps": 6, "attempt": 1},
                    },
                ),
                OpenApiExample(
                    "authorization required",
                    value={
                        "jobId": "fb4b4490-6cba-43ac-87bb-42249acaac23",
                        "jobType": "generateSemrushMarket",
                        "status": "FAILED",
                        "result": None,
                        "error": {
                            "code": "NEEDS_REAUTH",
                            "message": "Authorisation to write to Semrush has expired. Re-authorise to continue.",
                            "retryable": False,
                            "needsReauth": True,
                        },
                        "createdAt": "2026-01-05T10:00:00Z",
                        "updatedAt": "2026-01-05T10:03:40Z",
                        "progress": {"phase": "generated", "step": 3, "steps": 6, "attempt": 1},
                    },
                ),
            ],
        ),
        304: OpenApiResponse(
            description="Not modified since the ETag in If-None-Match (no body): at once, or at the end of `wait`."
        ),
        **COMMON_PROBLEMS,
    },
)


REAUTHORIZE: dict[str, Any] = dict(
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
        SEMRUSH_AUDIENCE,
        promise_token_parameter(
            "A promise token the browser holds, bare or as the typed JSON object "
            "`{promise_token, token_type, expires_in}`: exchanged at IMS, the job "
            "gets the rotated token. Absent: one is minted from the IMS bearer."
        ),
    ],
    responses={
        202: OpenApiResponse(
            response=ReauthAcceptedSerializer, description="Accepted: the same job id is queued again."
        ),
        (400, PROBLEM_CONTENT_TYPE): problem_described(
            "A path id is not a UUID, x-promise-audience is not `semrush`, or x-promise-token is malformed."
        ),
        (401, PROBLEM_CONTENT_TYPE): problem_described(
            "Missing, invalid or expired bearer token; a promise token IMS did not exchange; or a session-token "
            "caller without x-promise-token (`PROMISE_TOKEN_REQUIRED`)."
        ),
        (403, PROBLEM_CONTENT_TYPE): problem_described(
            "The caller is not the user who started the job (`not_job_requester`), or the `x-promise-token` was "
            "minted from a bearer that did not name the job's organization (`organization_access_denied`)."
        ),
        (404, PROBLEM_CONTENT_TYPE): COMMON_PROBLEMS[(404, PROBLEM_CONTENT_TYPE)],
        (409, PROBLEM_CONTENT_TYPE): problem_described(
            "The job is not awaiting re-authorisation, or another re-authorisation of it is under way."
        ),
        (429, PROBLEM_CONTENT_TYPE): problem_described(
            "Too many re-authorisations by this user or of this organization: retry after `Retry-After` seconds."
        ),
        (502, PROBLEM_CONTENT_TYPE): problem_described(
            "IMS did not issue a credential; the job still awaits re-authorisation."
        ),
    },
)


REGENERATE: dict[str, Any] = dict(
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
        *PATH_IDS[:2],
        MARKET_ID,
        SEMRUSH_AUDIENCE,
        promise_token_parameter(
            "A promise token the browser holds (see createMarket): exchanged at IMS; "
            "required for a session-token caller. Absent: the IMS bearer."
        ),
        OpenApiParameter(
            "Location", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[202], description="The job's poll URL."
        ),
    ],
    responses={
        202: OpenApiResponse(RegenerationAcceptedSerializer, "Queued (or already running)."),
        (400, PROBLEM_CONTENT_TYPE): problem_described("An id is not a UUID, or a header is unusable."),
        (401, PROBLEM_CONTENT_TYPE): problem_described("Missing, invalid or expired bearer token."),
        (403, PROBLEM_CONTENT_TYPE): problem_described(
            "Not a member of the organization (or the `x-promise-token` was minted from a bearer that did not name "
            "it: the same answer), or Serenity is not active for it."
        ),
        (404, PROBLEM_CONTENT_TYPE): problem_described("No such organization, brand or market for this caller."),
        (409, PROBLEM_CONTENT_TYPE): problem_described(
            "Generation disabled, brand not active, or nothing in the catalogue to generate from."
        ),
        (429, PROBLEM_CONTENT_TYPE): problem_described("Too many requests: retry after `Retry-After` seconds."),
        (502, PROBLEM_CONTENT_TYPE): problem_described("Semrush or IMS did not answer."),
        (503, PROBLEM_CONTENT_TYPE): problem_described(
            "No worker ready, or the queue refused the job: retry after `Retry-After` seconds."
        ),
    },
)
