"""Django settings, all read from the environment (django-environ); every variable is in docker/.env.example.

Local runs (SERENITY_ENVIRONMENT=local, the default) get safe embedded defaults: SQLite, the local SQS on
127.0.0.1:5055, the simulators mounted under /sandbox/. Any other environment has no defaults for values
that cannot be safe, so a misconfigured deployment fails at start-up with a clear message.
"""
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from serenity import localsecrets

BASE_DIR = Path(__file__).resolve().parent.parent

# FileAwareEnv: every variable may also be given as NAME_FILE, a path whose content is the value
# (how container secrets are mounted).
env = environ.FileAwareEnv()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False) if (BASE_DIR / ".env").exists() else None

# Local state of the embedded run: the SQLite database, locally minted secrets, logs.
VAR_DIR = Path(env.str("SERENITY_VAR_DIR", default=str(BASE_DIR / "var")))

ENVIRONMENT = env.str("SERENITY_ENVIRONMENT", default="local")
IS_LOCAL = ENVIRONMENT in ("local", "test")


def _required(name: str, local_default=None, cast=str):
    """A value that production must set explicitly; local runs may fall back to `local_default`."""
    value = env.get_value(name, cast=cast, default=None)
    if value not in (None, ""):
        return value
    if IS_LOCAL and local_default is not None:
        return local_default
    raise ImproperlyConfigured(
        f"{name} must be set when SERENITY_ENVIRONMENT={ENVIRONMENT!r} (see docker/.env.example)."
    )


_local = localsecrets.load_or_create(VAR_DIR / "local-secrets.json") if IS_LOCAL else {}

SECRET_KEY = _required("SECRET_KEY", _local.get("SECRET_KEY"))
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"] if IS_LOCAL else [])

DATABASES = {"default": env.db_url_config(_required("DATABASE_URL", f"sqlite:///{VAR_DIR / 'serenity.sqlite3'}"))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded run has the API, the worker's threads and beat writing at once: WAL lets readers
    # proceed beside one writer, the busy timeout queues writers instead of failing, and IMMEDIATE
    # transactions take the write lock up front so no transaction fails upgrading a read lock.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
    }
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=0))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The shared cache (request throttles). Default: a table in the database (created by `migrate`), shared by
# every process; `redis://…` or any django-environ cache URL in CACHE_URL replaces it.
CACHES = {"default": env.cache_url("CACHE_URL", default="dbcache://serenity_cache")}

# Encryption at rest for promise tokens: comma-separated Fernet keys, newest first (MultiFernet).
PROMISE_TOKEN_KEYS = _required("PROMISE_TOKEN_KEYS", _local.get("PROMISE_TOKEN_KEYS")).split(",")

SANDBOX_ENABLED = IS_LOCAL and env.bool("SANDBOX_ENABLED", default=True)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "serenity.apps.SerenityConfig",
    "tokens",
    "jobs",
    "markets",
]
if SANDBOX_ENABLED:
    INSTALLED_APPS += ["serenity.sandbox.ims", "serenity.sandbox.semrush", "serenity.sandbox.drs"]

MIDDLEWARE = [
    "serenity.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's and the API docs' static files (Swagger UI assets are bundled, no CDN).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "serenity.urls"
WSGI_APPLICATION = "serenity.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# WhiteNoise serves the few static files (admin, bundled Swagger UI) straight from the installed apps:
# no collectstatic step in any environment.
WHITENOISE_USE_FINDERS = True

# Security headers for deployments (TLS terminates at the load balancer).
if not IS_LOCAL:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["serenity.auth.ImsBearerAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "serenity.problems.problem_exception_handler",
    "DEFAULT_THROTTLE_RATES": {
        "reauth": env.str("THROTTLE_REAUTH_RATE", default="10/min"),
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Serenity market provisioning API",
    "DESCRIPTION": "Onboard AI-search monitoring markets for brands; poll and re-authorise prompt generation jobs.",
    "VERSION": "2.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Feature flags -----------------------------------------------------------------------------
# `true` in any case turns asynchronous prompt generation on; anything else leaves the old path.
SERENITY_ASYNC_PROMPT_GEN = env.str("SERENITY_ASYNC_PROMPT_GEN", default="true" if IS_LOCAL else "false")

# --- Where the local simulators live (the embedded run serves them beside the API) --------------
PORT = env.int("PORT", default=8000)
LOCAL_BASE_URL = env.str("LOCAL_BASE_URL", default=f"http://127.0.0.1:{PORT}")

# --- IMS ---------------------------------------------------------------------------------------
IMS_HOST = _required("IMS_HOST", f"{LOCAL_BASE_URL}/sandbox/ims")
IMS_JWKS_URL = _required("IMS_JWKS_URL", f"{IMS_HOST}/ims/keys")
IMS_ISSUER = _required("IMS_ISSUER", "ims-sandbox")
IMS_AUDIENCE = env.list("IMS_AUDIENCE", default=[]) or [_required("IMS_AUDIENCE", "serenity-ui")]
IMS_JWKS_CACHE_SECONDS = env.int("IMS_JWKS_CACHE_SECONDS", default=300)
IMS_TIMEOUT_SECONDS = env.float("IMS_TIMEOUT_SECONDS", default=10.0)


def _pair(prefix: str) -> dict:
    return {
        "emitter_client_id": _required(f"{prefix}_EMITTER_CLIENT_ID", f"{prefix.lower()}-emitter"),
        "emitter_client_secret": _required(f"{prefix}_EMITTER_CLIENT_SECRET", "local-only"),
        "emitter_definition_id": _required(f"{prefix}_EMITTER_DEFINITION_ID", f"{prefix.lower()}-definition"),
        "consumer_client_id": _required(f"{prefix}_CONSUMER_CLIENT_ID", f"{prefix.lower()}-consumer"),
        "consumer_client_secret": _required(f"{prefix}_CONSUMER_CLIENT_SECRET", "local-only"),
    }


# Client pairs for promise tokens, by name. `default` serves requests without x-promise-audience.
IMS_CLIENT_PAIRS = {"default": _pair("IMS_DEFAULT"), "semrush": _pair("IMS_SEMRUSH")}

# --- Semrush -----------------------------------------------------------------------------------
SEMRUSH_API_BASE = _required("SEMRUSH_API_BASE", f"{LOCAL_BASE_URL}/sandbox/semrush")
SEMRUSH_TIMEOUT_SECONDS = env.float("SEMRUSH_TIMEOUT_SECONDS", default=20.0)
SEMRUSH_WRITE_BUDGET_SECONDS = env.int("SEMRUSH_WRITE_BUDGET_SECONDS", default=120)
SEMRUSH_PARENT_WORKSPACE_ID = env.str("SEMRUSH_PARENT_WORKSPACE_ID", default="serenity")
# The old synchronous path's write deadline, shared by every market of one request.
SYNC_WRITE_DEADLINE_SECONDS = env.float("SYNC_WRITE_DEADLINE_SECONDS", default=12.0)
SYNC_TOP_TOPICS = env.int("SYNC_TOP_TOPICS", default=10)

# --- DRS ---------------------------------------------------------------------------------------
DRS_TRANSPORT = env.str("DRS_TRANSPORT", default="http" if IS_LOCAL else "lambda")  # lambda | http
DRS_HTTP_URL = env.str("DRS_HTTP_URL", default=f"{LOCAL_BASE_URL}/sandbox/drs/invoke" if IS_LOCAL else "")
DRS_PROMPT_GENERATION_FUNCTION = env.str(
    "DRS_PROMPT_GENERATION_FUNCTION",
    default="arn:aws:lambda:us-east-1:000000000000:function:drs-prompt-generation" if IS_LOCAL else "",
)
DRS_PROMPT_GENERATION_MODEL = env.str("DRS_PROMPT_GENERATION_MODEL", default="gpt-5-nano")
DRS_TIMEOUT_SECONDS = env.int("DRS_TIMEOUT_SECONDS", default=300)
DRS_NUM_PROMPTS = env.int("DRS_NUM_PROMPTS", default=50)

# --- AWS: SQS, SSM -----------------------------------------------------------------------------
AWS_REGION = env.str("AWS_REGION", default="us-east-1")
AWS_ENDPOINT_URL = env.str("AWS_ENDPOINT_URL", default="http://127.0.0.1:5055" if IS_LOCAL else "")
# Local endpoints accept any credentials; deployments use the default credential chain.
AWS_ACCESS_KEY_ID = env.str("AWS_ACCESS_KEY_ID", default="local" if IS_LOCAL else "")
AWS_SECRET_ACCESS_KEY = env.str("AWS_SECRET_ACCESS_KEY", default="local" if IS_LOCAL else "")
AWS_ACCOUNT_ID = env.str("AWS_ACCOUNT_ID", default="123456789012")
MARKET_JOBS_QUEUE = env.str("MARKET_JOBS_QUEUE", default="serenity-market-jobs")
MARKET_JOBS_DLQ = env.str("MARKET_JOBS_DLQ", default="serenity-market-jobs-dlq")
_queue_base = AWS_ENDPOINT_URL or f"https://sqs.{AWS_REGION}.amazonaws.com"
MARKET_JOBS_QUEUE_URL = env.str("MARKET_JOBS_QUEUE_URL", default=f"{_queue_base}/{AWS_ACCOUNT_ID}/{MARKET_JOBS_QUEUE}")
MARKET_JOBS_DLQ_URL = env.str("MARKET_JOBS_DLQ_URL", default=f"{_queue_base}/{AWS_ACCOUNT_ID}/{MARKET_JOBS_DLQ}")
# Above JOB_MAX_ATTEMPTS, so a job whose deliveries keep crashing fails RETRIES_EXHAUSTED on the job row
# before its message is parked in the DLQ.
MARKET_JOBS_MAX_RECEIVE_COUNT = env.int("MARKET_JOBS_MAX_RECEIVE_COUNT", default=8)
QUEUE_VISIBILITY_TIMEOUT_SECONDS = env.int("QUEUE_VISIBILITY_TIMEOUT_SECONDS", default=960)
READINESS_PARAMETER = env.str("READINESS_PARAMETER", default="/spacecat/serenity-market-worker/consumer-ready")
READINESS_CACHE_SECONDS = env.int("READINESS_CACHE_SECONDS", default=60)

# --- Jobs --------------------------------------------------------------------------------------
JOB_LEASE_TTL_SECONDS = env.int("JOB_LEASE_TTL_SECONDS", default=930)
JOB_TASK_TIME_LIMIT_SECONDS = env.int("JOB_TASK_TIME_LIMIT_SECONDS", default=900)
JOB_MAX_ATTEMPTS = env.int("JOB_MAX_ATTEMPTS", default=5)
JOB_RETRY_BASE_SECONDS = env.int("JOB_RETRY_BASE_SECONDS", default=30)
JOB_RETRY_MAX_SECONDS = env.int("JOB_RETRY_MAX_SECONDS", default=900)
JOB_HEARTBEAT_SECONDS = env.int("JOB_HEARTBEAT_SECONDS", default=60)
JOB_RECORD_TTL_DAYS = env.int("JOB_RECORD_TTL_DAYS", default=7)
JOB_ENQUEUE_GRACE_SECONDS = env.int("JOB_ENQUEUE_GRACE_SECONDS", default=60)
# How long one re-authorisation may hold its claim on a job while it obtains a credential from IMS: the
# mint's worst case (three attempts that never connected, each bounded by the IMS timeout) with room.
JOB_REAUTH_CLAIM_SECONDS = int(3 * IMS_TIMEOUT_SECONDS + 30)
JOB_STUCK_AFTER_SECONDS = env.int("JOB_STUCK_AFTER_SECONDS", default=3600)
METRICS_NAMESPACE = "SpacecatSerenityMarketWorker"
# What a client does when called inside a database transaction (serenity/clients/guard.py): `raise` in
# local runs and tests, so the mistake fails loudly; `log` (an error line) in deployments.
NETWORK_CALL_IN_TRANSACTION = env.str("NETWORK_CALL_IN_TRANSACTION", default="raise" if IS_LOCAL else "log")

# --- Celery on SQS (see docs/operations.md for why each option is set) ---------------------------
_endpoint = urlsplit(AWS_ENDPOINT_URL) if AWS_ENDPOINT_URL else None
CELERY_BROKER_URL = env.str(
    "CELERY_BROKER_URL", default=f"sqs://{_endpoint.hostname}:{_endpoint.port}" if _endpoint else "sqs://"
)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "region": AWS_REGION,
    "is_secure": bool(_endpoint is None or _endpoint.scheme == "https"),
    "wait_time_seconds": env.int("SQS_WAIT_TIME_SECONDS", default=10),
    "polling_interval": env.float("SQS_POLLING_INTERVAL", default=1.0),
    "predefined_queues": {
        MARKET_JOBS_QUEUE: {
            "url": MARKET_JOBS_QUEUE_URL,
            **({"access_key_id": AWS_ACCESS_KEY_ID, "secret_access_key": AWS_SECRET_ACCESS_KEY}
               if AWS_ACCESS_KEY_ID else {}),
        },
    },
}
CELERY_TASK_DEFAULT_QUEUE = MARKET_JOBS_QUEUE
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_SEND_SENT_EVENT = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_TIME_LIMIT = JOB_TASK_TIME_LIMIT_SECONDS
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "sweep-unsent-jobs": {"task": "jobs.sweep_unsent", "schedule": env.int("SWEEP_EVERY_SECONDS", default=60)},
    "probe-stuck-jobs": {"task": "jobs.probe", "schedule": env.int("PROBE_EVERY_SECONDS", default=300)},
    "purge-expired-jobs": {"task": "jobs.purge_expired", "schedule": env.int("PURGE_EVERY_SECONDS", default=86400)},
}

# --- Logging: JSON lines with request/job ids; token values are redacted before output ---------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "serenity.logging.ContextFilter"},
        "redact": {"()": "serenity.logging.RedactingFilter"},
    },
    "formatters": {"json": {"()": "serenity.logging.JsonFormatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["context", "redact"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # EMF lines are metrics, not chatter: they are emitted whatever LOG_LEVEL says.
        "serenity.metrics": {"level": "INFO"},
        "django.server": {"level": "WARNING"},
        "werkzeug": {"level": "WARNING"},
        "botocore": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
