"""The services the product calls: IMS, Semrush, DRS, and AWS (SQS, SSM); the feature flag; every client's
timeouts. Local runs point at the simulators the embedded run serves beside the API."""

from serenity.settings.environment import IS_LOCAL, env, required

# `true` in any case turns asynchronous prompt generation on; anything else leaves the old path.
SERENITY_ASYNC_PROMPT_GEN = env.str("SERENITY_ASYNC_PROMPT_GEN", default="true" if IS_LOCAL else "false")

# --- Where the local simulators live (the embedded run serves them beside the API) ----------------------------
PORT = env.int("PORT", default=8000)
LOCAL_BASE_URL = env.str("LOCAL_BASE_URL", default=f"http://127.0.0.1:{PORT}")

# --- IMS -------------------------------------------------------------------------------------------------------
IMS_HOST = required("IMS_HOST", f"{LOCAL_BASE_URL}/sandbox/ims")
IMS_JWKS_URL = required("IMS_JWKS_URL", f"{IMS_HOST}/ims/keys")
IMS_ISSUER = required("IMS_ISSUER", "ims-sandbox")
IMS_AUDIENCE = env.list("IMS_AUDIENCE", default=[]) or [required("IMS_AUDIENCE", "serenity-ui")]
IMS_JWKS_CACHE_SECONDS = env.int("IMS_JWKS_CACHE_SECONDS", default=300)
# A bearer naming an unknown key id makes the key set be fetched again at most this often per process.
IMS_JWKS_REFETCH_MIN_SECONDS = env.int("IMS_JWKS_REFETCH_MIN_SECONDS", default=30)
IMS_TIMEOUT_SECONDS = env.float("IMS_TIMEOUT_SECONDS", default=10.0)
# IMS calls one process holds at once (0: no bound); more wait for a place before anything is sent, so a burst
# (a worker's DRS calls returning together, each then exchanging its token) queues here, not at IMS, where a wait
# past the timeout could lose a rotated promise token (tokens/clients/ims.py).
IMS_MAX_IN_FLIGHT = env.int("IMS_MAX_IN_FLIGHT", default=16)


def _pair(prefix: str) -> dict:
    return {
        "emitter_client_id": required(f"{prefix}_EMITTER_CLIENT_ID", f"{prefix.lower()}-emitter"),
        "emitter_client_secret": required(f"{prefix}_EMITTER_CLIENT_SECRET", "local-only"),
        "emitter_definition_id": required(f"{prefix}_EMITTER_DEFINITION_ID", f"{prefix.lower()}-definition"),
        "consumer_client_id": required(f"{prefix}_CONSUMER_CLIENT_ID", f"{prefix.lower()}-consumer"),
        "consumer_client_secret": required(f"{prefix}_CONSUMER_CLIENT_SECRET", "local-only"),
    }


# Client pairs for promise tokens, by name. `default` serves requests without x-promise-audience.
IMS_CLIENT_PAIRS = {"default": _pair("IMS_DEFAULT"), "semrush": _pair("IMS_SEMRUSH")}

# --- Semrush ---------------------------------------------------------------------------------------------------
SEMRUSH_API_BASE = required("SEMRUSH_API_BASE", f"{LOCAL_BASE_URL}/sandbox/semrush")
SEMRUSH_TIMEOUT_SECONDS = env.float("SEMRUSH_TIMEOUT_SECONDS", default=20.0)
SEMRUSH_WRITE_BUDGET_SECONDS = env.int("SEMRUSH_WRITE_BUDGET_SECONDS", default=120)
# The fleet's Semrush request-rate budget per IMS client pair, shared by every worker process through PostgreSQL
# (markets/clients/semrush_budget.py): the worker's calls are spaced at least 1 s / this apart. Semrush admits 10
# requests per second per account; the default leaves 2 for the entry points' calls, which do not take slots.
# 0 turns it off.
SEMRUSH_MAX_CALLS_PER_SECOND = env.int("SEMRUSH_MAX_CALLS_PER_SECOND", default=8)
SEMRUSH_PARENT_WORKSPACE_ID = env.str("SEMRUSH_PARENT_WORKSPACE_ID", default="serenity")
# The old synchronous path's write deadline, shared by every market of one request.
SYNC_WRITE_DEADLINE_SECONDS = env.float("SYNC_WRITE_DEADLINE_SECONDS", default=12.0)
# Markets of one request provisioned at once (activate: up to 50), each a handful of Semrush and IMS calls
# and one queue message: bounded so one request cannot flood Semrush or take every database connection.
MARKET_PROVISION_CONCURRENCY = env.int("MARKET_PROVISION_CONCURRENCY", default=4)
SYNC_TOP_TOPICS = env.int("SYNC_TOP_TOPICS", default=10)

# --- DRS -------------------------------------------------------------------------------------------------------
DRS_TRANSPORT = env.str("DRS_TRANSPORT", default="http" if IS_LOCAL else "lambda")  # lambda | http
DRS_HTTP_URL = env.str("DRS_HTTP_URL", default=f"{LOCAL_BASE_URL}/sandbox/drs/invoke" if IS_LOCAL else "")
DRS_PROMPT_GENERATION_FUNCTION = env.str(
    "DRS_PROMPT_GENERATION_FUNCTION",
    default="arn:aws:lambda:us-east-1:000000000000:function:drs-prompt-generation" if IS_LOCAL else "",
)
DRS_PROMPT_GENERATION_MODEL = env.str("DRS_PROMPT_GENERATION_MODEL", default="gpt-5-nano")
DRS_TIMEOUT_SECONDS = env.int("DRS_TIMEOUT_SECONDS", default=300)
DRS_NUM_PROMPTS = env.int("DRS_NUM_PROMPTS", default=50)

# --- AWS: SQS, SSM ---------------------------------------------------------------------------------------------
AWS_REGION = env.str("AWS_REGION", default="us-east-1")
AWS_ENDPOINT_URL = env.str("AWS_ENDPOINT_URL", default="http://127.0.0.1:5055" if IS_LOCAL else "")
# Local endpoints accept any credentials; deployments use the default credential chain.
AWS_ACCESS_KEY_ID = env.str("AWS_ACCESS_KEY_ID", default="local" if IS_LOCAL else "")
AWS_SECRET_ACCESS_KEY = env.str("AWS_SECRET_ACCESS_KEY", default="local" if IS_LOCAL else "")
AWS_ACCOUNT_ID = env.str("AWS_ACCOUNT_ID", default="123456789012")
# Every SQS call (a publish in a request thread included) waits at most connect + read, and tries at most
# SQS_MAX_ATTEMPTS times; botocore's defaults (60 s each, several retries) would hold a request for minutes.
SQS_CONNECT_TIMEOUT_SECONDS = env.float("SQS_CONNECT_TIMEOUT_SECONDS", default=2.0)
SQS_READ_TIMEOUT_SECONDS = env.float("SQS_READ_TIMEOUT_SECONDS", default=5.0)
SQS_MAX_ATTEMPTS = env.int("SQS_MAX_ATTEMPTS", default=2)
MARKET_JOBS_QUEUE = env.str("MARKET_JOBS_QUEUE", default="serenity-market-jobs")
MARKET_JOBS_DLQ = env.str("MARKET_JOBS_DLQ", default="serenity-market-jobs-dlq")
# Beat's maintenance tasks (sweeper, purge) have a queue of their own: a job backlog never delays them.
MAINTENANCE_QUEUE = env.str("MAINTENANCE_QUEUE", default="serenity-maintenance")
_queue_base = AWS_ENDPOINT_URL or f"https://sqs.{AWS_REGION}.amazonaws.com"
MARKET_JOBS_QUEUE_URL = env.str("MARKET_JOBS_QUEUE_URL", default=f"{_queue_base}/{AWS_ACCOUNT_ID}/{MARKET_JOBS_QUEUE}")
MARKET_JOBS_DLQ_URL = env.str("MARKET_JOBS_DLQ_URL", default=f"{_queue_base}/{AWS_ACCOUNT_ID}/{MARKET_JOBS_DLQ}")
MAINTENANCE_QUEUE_URL = env.str("MAINTENANCE_QUEUE_URL", default=f"{_queue_base}/{AWS_ACCOUNT_ID}/{MAINTENANCE_QUEUE}")
# Above JOB_MAX_ATTEMPTS, so a job whose deliveries keep crashing fails RETRIES_EXHAUSTED on the job row
# before SQS moves its message to the DLQ.
MARKET_JOBS_MAX_RECEIVE_COUNT = env.int("MARKET_JOBS_MAX_RECEIVE_COUNT", default=8)
QUEUE_VISIBILITY_TIMEOUT_SECONDS = env.int("QUEUE_VISIBILITY_TIMEOUT_SECONDS", default=960)
READINESS_PARAMETER = env.str("READINESS_PARAMETER", default="/spacecat/serenity-market-worker/consumer-ready")
READINESS_CACHE_SECONDS = env.int("READINESS_CACHE_SECONDS", default=60)
