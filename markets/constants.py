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
