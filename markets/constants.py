"""Names shared by the market-generation producer, handler and APIs (error codes: markets/codes.py)."""

# The job type stored on async_jobs rows and carried in queue messages (and shown as `jobType`).
MARKET_GENERATION_JOB_TYPE = "generateSemrushMarket"

# Phases a market-generation job moves through (async_jobs.phase), in order.
PHASE_QUEUED = "queued"
PHASE_GENERATING = "generating"  # DRS call in flight
PHASE_GENERATED = "generated"  # batch persisted in checkpoints["batch"]
PHASE_WRITING = "writing"  # token exchanged, Semrush writes under way
PHASE_WRITTEN = "written"  # prompts written, checkpoints["written"] set
PHASE_PUBLISHED = "published"
