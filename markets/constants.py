"""Names shared by the market-generation producer, handler, APIs and runbooks."""
from jobs import services as jobs_services

# The job type stored on async_jobs rows and carried in queue messages (and shown as `jobType`).
MARKET_GENERATION_JOB_TYPE = "generateSemrushMarket"

# Phases a market-generation job moves through (async_jobs.phase), in order.
PHASE_QUEUED = "queued"
PHASE_GENERATING = "generating"  # DRS call in flight
PHASE_GENERATED = "generated"  # batch persisted in checkpoints["batch"]
PHASE_WRITING = "writing"  # token exchanged, Semrush writes under way
PHASE_WRITTEN = "written"  # prompts written, checkpoints["written"] set
PHASE_PUBLISHED = "published"

# Job error codes of the market-generation handler (SPEC §5).
NEEDS_REAUTH = jobs_services.NEEDS_REAUTH  # the code jobs.job_reauthorize waits for
PROMPT_GENERATION_HELD = "PROMPT_GENERATION_HELD"
PROMPT_GENERATION_GATE_ERROR = "PROMPT_GENERATION_GATE_ERROR"
PROMPT_GENERATION_EMPTY = "PROMPT_GENERATION_EMPTY"
DRS_GENERATION_TERMINAL = "DRS_GENERATION_TERMINAL"
DRS_INVALID_TARGET = "DRS_INVALID_TARGET"
SEMRUSH_REJECTED = "SEMRUSH_REJECTED"
IMS_EXCHANGE_REJECTED = "IMS_EXCHANGE_REJECTED"  # IMS answered an exchange with something unusable

# Retryable codes (they appear in job history and in RETRIES_EXHAUSTED messages, never as a final code).
IMS_UNAVAILABLE = "IMS_UNAVAILABLE"
SEMRUSH_UNAVAILABLE = "SEMRUSH_UNAVAILABLE"
SEMRUSH_PROJECT_MISSING = "SEMRUSH_PROJECT_MISSING"
SEMRUSH_PUBLISH_FAILED = "SEMRUSH_PUBLISH_FAILED"
