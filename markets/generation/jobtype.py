"""The market-generation job type in one place: its type name, the phases it moves through, its error codes with
the one public sentence each shows callers (SPEC §5), and the deterministic id of a market slice's job (§4.3).

The job core's own codes (jobs/codes.py) are included, some with a sentence of their own for this job type, and
so are the codes the DRS client raises (markets/clients/drs.py defines them, beside the answers they name, since
a client module imports nothing from the sub-domains that call it). Every other code is defined here once; the
handler, the DTO and the docs use these names.
"""

import hashlib
import uuid

from jobs import codes as job_codes
from markets.clients import drs

# The job type stored on async_jobs rows and carried in queue messages (and shown as `jobType`).
MARKET_GENERATION_JOB_TYPE = "generateSemrushMarket"

# Phases a market-generation job moves through (async_jobs.phase), in order.
PHASE_QUEUED = "queued"
PHASE_GENERATING = "generating"  # DRS call in flight
PHASE_GENERATED = "generated"  # batch persisted in checkpoints["batch"]
PHASE_WRITING = "writing"  # token exchanged, Semrush writes under way
PHASE_WRITTEN = "written"  # prompts written, checkpoints["written"] set
PHASE_PUBLISHED = "published"

NEEDS_REAUTH = job_codes.NEEDS_REAUTH  # the code the job core's re-authorisation waits for
RETRIES_EXHAUSTED = job_codes.RETRIES_EXHAUSTED
THROTTLED_TOO_LONG = job_codes.THROTTLED_TOO_LONG

# Terminal codes (the job ends FAILED with them).
PROMPT_GENERATION_HELD = drs.PROMPT_GENERATION_HELD
PROMPT_GENERATION_GATE_ERROR = drs.PROMPT_GENERATION_GATE_ERROR
DRS_GENERATION_TERMINAL = drs.DRS_GENERATION_TERMINAL
DRS_INVALID_TARGET = drs.DRS_INVALID_TARGET
PROMPT_GENERATION_EMPTY = "PROMPT_GENERATION_EMPTY"
SEMRUSH_REJECTED = "SEMRUSH_REJECTED"  # Semrush refused a write with a 4xx
IMS_EXCHANGE_REJECTED = "IMS_EXCHANGE_REJECTED"  # IMS answered an exchange with something unusable
MARKET_DELETED = "MARKET_DELETED"  # the market was deleted while its prompts were being generated: cancelled

# Retryable codes: they appear in the job history and in a RETRIES_EXHAUSTED message, never as a final code.
DRS_TRANSIENT = drs.DRS_TRANSIENT
PROMPT_GENERATION_GATE_RETRYABLE = drs.PROMPT_GENERATION_GATE_RETRYABLE
IMS_UNAVAILABLE = "IMS_UNAVAILABLE"
SEMRUSH_UNAVAILABLE = "SEMRUSH_UNAVAILABLE"
SEMRUSH_PROJECT_MISSING = "SEMRUSH_PROJECT_MISSING"
SEMRUSH_PUBLISH_FAILED = "SEMRUSH_PUBLISH_FAILED"

# Back-pressure codes (a throttled call: no attempt spent, the job re-sent later): in the job history only.
DRS_THROTTLED = drs.DRS_THROTTLED  # Lambda throttling (TooManyRequestsException)
SEMRUSH_THROTTLED = "SEMRUSH_THROTTLED"  # Semrush 429
IMS_THROTTLED = "IMS_THROTTLED"  # IMS 429 on the exchange (it did not exchange)

# The one sentence a caller sees per code. The stored `error.message` is for operators: it may name upstream
# statuses, Semrush project ids or exception classes, so it never leaves through the API.
PUBLIC_MESSAGES = {
    **job_codes.PUBLIC_MESSAGES,
    NEEDS_REAUTH: "Authorisation to write to Semrush has expired. Re-authorise to continue.",
    RETRIES_EXHAUSTED: "Prompt generation kept failing and was stopped.",
    THROTTLED_TOO_LONG: "Prompt generation waited too long for a busy service and was stopped.",
    PROMPT_GENERATION_HELD: "The generated prompts did not pass the quality checks and were held back.",
    PROMPT_GENERATION_GATE_ERROR: "Prompt generation was stopped by a quality check.",
    PROMPT_GENERATION_EMPTY: "Prompt generation produced no usable prompts.",
    DRS_GENERATION_TERMINAL: "The prompt generation service could not complete the request.",
    DRS_INVALID_TARGET: "The prompt generation service is not configured correctly.",
    SEMRUSH_REJECTED: "Semrush rejected the generated prompts.",
    IMS_EXCHANGE_REJECTED: "The identity service did not accept the delegated credential.",
    MARKET_DELETED: "Prompt generation was cancelled by a request to delete the market.",
}
# Codes without a sentence of their own (an operator's code, one added later) show this.
DEFAULT_PUBLIC_MESSAGE = "Prompt generation failed."


def public_message(code: str | None) -> str:
    return PUBLIC_MESSAGES.get(code or "", DEFAULT_PUBLIC_MESSAGE)


def generation_job_id(brand_id, geo_target_id: int, language_code: str) -> uuid.UUID:
    """The deterministic generation-job id of a market slice: the reservation key. UUID (version-4 layout) from
    SHA-256 of `serenity-generate-semrush-market:<brand>:<geo>:<lang>`.

    Test vector: ("brand-1", 2840, "en") -> fb4b4490-6cba-43ac-87bb-42249acaac23.
    """
    key = f"serenity-generate-semrush-market:{brand_id}:{geo_target_id}:{language_code}"
    digits = list(hashlib.sha256(key.encode()).hexdigest()[:32])
    digits[12] = "4"
    digits[16] = format(8 + int(digits[16], 16) % 4, "x")
    return uuid.UUID("".join(digits))
