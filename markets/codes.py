"""Error codes of market-generation jobs (SPEC §5) and the one public sentence each shows callers.

The job core's own codes (jobs/codes.py) are included, some with a sentence of their own for this job type.
A code is defined here once; the DRS client, the handler, the DTO and the docs use these names.
"""

from jobs import codes as job_codes

NEEDS_REAUTH = job_codes.NEEDS_REAUTH  # the code the job core's re-authorisation waits for
RETRIES_EXHAUSTED = job_codes.RETRIES_EXHAUSTED
THROTTLED_TOO_LONG = job_codes.THROTTLED_TOO_LONG

# Terminal codes (the job ends FAILED with them).
PROMPT_GENERATION_HELD = "PROMPT_GENERATION_HELD"
PROMPT_GENERATION_GATE_ERROR = "PROMPT_GENERATION_GATE_ERROR"
PROMPT_GENERATION_EMPTY = "PROMPT_GENERATION_EMPTY"
DRS_GENERATION_TERMINAL = "DRS_GENERATION_TERMINAL"
DRS_INVALID_TARGET = "DRS_INVALID_TARGET"
SEMRUSH_REJECTED = "SEMRUSH_REJECTED"  # Semrush refused a write with a 4xx
IMS_EXCHANGE_REJECTED = "IMS_EXCHANGE_REJECTED"  # IMS answered an exchange with something unusable

# Retryable codes: they appear in the job history and in a RETRIES_EXHAUSTED message, never as a final code.
DRS_TRANSIENT = "DRS_TRANSIENT"
PROMPT_GENERATION_GATE_RETRYABLE = "PROMPT_GENERATION_GATE_RETRYABLE"
IMS_UNAVAILABLE = "IMS_UNAVAILABLE"
SEMRUSH_UNAVAILABLE = "SEMRUSH_UNAVAILABLE"
SEMRUSH_PROJECT_MISSING = "SEMRUSH_PROJECT_MISSING"
SEMRUSH_PUBLISH_FAILED = "SEMRUSH_PUBLISH_FAILED"

# Back-pressure codes (a throttled call: no attempt spent, the job re-sent later): in the job history only.
DRS_THROTTLED = "DRS_THROTTLED"  # Lambda throttling (TooManyRequestsException)
SEMRUSH_THROTTLED = "SEMRUSH_THROTTLED"  # Semrush 429

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
}
# Codes without a sentence of their own (an operator's code, one added later) show this.
DEFAULT_PUBLIC_MESSAGE = "Prompt generation failed."


def public_message(code: str | None) -> str:
    return PUBLIC_MESSAGES.get(code or "", DEFAULT_PUBLIC_MESSAGE)
