"""Django itself: secrets, the database, apps, middleware, security headers, DRF, the API docs, the cache,
request limits and the admin's login limits."""

from datetime import timedelta
from typing import Any

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from serenity import localsecrets
from serenity.settings.environment import ENVIRONMENT, IS_LOCAL, VAR_DIR, env, required

# Django's generic classes (`ModelAdmin[Brand]`, `Manager[Job]`) take type arguments at run time, as the type
# checker reads them.
django_stubs_ext.monkeypatch()

_local = localsecrets.load_or_create(VAR_DIR / "local-secrets.json") if IS_LOCAL else {}

SECRET_KEY = required("SECRET_KEY", _local.get("SECRET_KEY"))
if not IS_LOCAL and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    # Django's own rule (security.W009), refused rather than warned about: sessions and signatures hang on it.
    raise ImproperlyConfigured(
        f"SECRET_KEY must be at least 50 characters long with at least 5 distinct characters when "
        f"SERENITY_ENVIRONMENT={ENVIRONMENT!r}."
    )
DEBUG = env.bool("DEBUG", default=False)
if DEBUG and not IS_LOCAL:
    # Debug pages name the settings, the URL configuration and local variables: never outside a local run.
    raise ImproperlyConfigured(f"DEBUG must be off when SERENITY_ENVIRONMENT={ENVIRONMENT!r} (it is for local runs).")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"] if IS_LOCAL else [])

# --- Database ----------------------------------------------------------------------------------------------
DATABASES = {"default": env.db_url_config(required("DATABASE_URL", f"sqlite:///{VAR_DIR / 'serenity.sqlite3'}"))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded run has the API, the worker's threads and beat writing at once: WAL lets readers
    # proceed beside one writer, the busy timeout queues writers instead of failing, and IMMEDIATE
    # transactions take the write lock up front so no transaction fails upgrading a read lock.
    DB_POOL_MAX_SIZE = 0  # one writer at a time: no pool, and a modest worker (WORKER_CONCURRENCY)
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
    }
else:
    # One pool of connections per process (psycopg_pool through Django's `pool` option), for the API's threads
    # and the worker's alike: a thread takes a connection for its database work and gives it back when it
    # waits on anything else (serenity/db.py), so a process holds at most DB_POOL_MAX_SIZE connections
    # however many threads it runs. DB_POOL_MAX_SIZE=0 turns the pool off: each thread then keeps its own
    # connection for up to DB_CONN_MAX_AGE seconds (a new PostgreSQL connection costs more than the poll's
    # whole query, so neither opens one per request or task).
    DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=16)
    DB_POOL_CHECK = env.bool("DB_POOL_CHECK", default=True)
    if DB_POOL_MAX_SIZE > 0:
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps the connections; Django must not
        _pool: dict[str, Any] | None = {
            "min_size": min(env.int("DB_POOL_MIN_SIZE", default=2), DB_POOL_MAX_SIZE),
            "max_size": DB_POOL_MAX_SIZE,
            # A thread waits this long for a connection before its query fails: above a burst of every
            # thread wanting one at once, and above the pool's reconnection backoff (1, 2, 4, 8 s) after a
            # restart or failover killed its connections, so a write after a DRS call still lands.
            "timeout": env.float("DB_POOL_TIMEOUT_SECONDS", default=30.0),
        }
    else:
        DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60))
        _pool = None
    # A connection found broken (a restart, a failover, an idle connection dropped) is replaced before use.
    # With the pool, by serenity/dbbackend: every checkout runs an empty statement first, and a dead one is
    # replaced (and the pool's other idle connections tested at once) before the request's first statement,
    # not by psycopg_pool's own `check`, which backs off 1, 2, 4 s… between dead connections. One round trip
    # per checkout (docs/benchmarks.md); DB_POOL_CHECK=false turns it off. Without the pool, Django's own
    # health check at the start of each request or task.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = _pool is None
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"]["ENGINE"] = "serenity.dbbackend"
    # Bounded waits: connecting, one statement, one lock. TCP keepalives notice a dead peer while a worker
    # sits idle for the length of a DRS call.
    DATABASES["default"]["OPTIONS"] = {
        "connect_timeout": env.int("DB_CONNECT_TIMEOUT_SECONDS", default=5),
        "options": f"-c statement_timeout={env.int('DB_STATEMENT_TIMEOUT_MS', default=30000)} "
        f"-c lock_timeout={env.int('DB_LOCK_TIMEOUT_MS', default=5000)}",
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
        # Parameters bound by the server: psycopg then prepares a statement the connection has run five times
        # (the poll's, the worker's), so PostgreSQL plans it once per connection, not on every execution.
        # Turn it off behind a pooler in transaction mode that cannot carry prepared statements.
        "server_side_binding": env.bool("DB_SERVER_SIDE_BINDING", default=True),
        "prepare_threshold": 5 if env.bool("DB_SERVER_SIDE_BINDING", default=True) else None,
        **({"pool": _pool} if _pool else {}),
        **DATABASES["default"].get("OPTIONS", {}),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The shared cache (the admin's read of the DLQ's members). Default: a table in the database (created by `migrate`),
# shared by every process; `redis://…` or any django-environ cache URL in CACHE_URL replaces it.
CACHES = {"default": env.cache_url("CACHE_URL", default="dbcache://serenity_cache")}

# Encryption at rest for promise tokens: comma-separated Fernet keys, newest first (MultiFernet).
PROMISE_TOKEN_KEYS = required("PROMISE_TOKEN_KEYS", _local.get("PROMISE_TOKEN_KEYS")).split(",")

# The local simulators are mounted only in local runs and tests, never in a deployment.
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
    "django_celery_beat",
    "axes",
    "corsheaders",
    "csp",
    "serenity.apps.SerenityConfig",
    "tokens",
    "jobs",
    "markets",
]
if SANDBOX_ENABLED:
    INSTALLED_APPS += ["sandbox.ims", "sandbox.semrush", "sandbox.drs"]

MIDDLEWARE = [
    "serenity.middleware.RequestIdMiddleware",
    # Every answer, preflights and static files included, carries a Content-Security-Policy.
    "serenity.middleware.CspMiddleware",
    # A preflight is answered before anything else looks at the request.
    "serenity.middleware.CorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's and the API docs' static files (Swagger UI assets are bundled, no CDN).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it answers a locked-out admin login attempt.
    "axes.middleware.AxesMiddleware",
]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
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
# Request bodies are small JSON documents; anything near this is abuse.
DATA_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024

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

# --- Request limits (serenity/limits.py): N/sec|min|hour|day per scope, counted in the database ------------------
THROTTLE_RATES = {
    "onboarding": env.str("THROTTLE_ONBOARDING_RATE", default="60/min"),
    "reauth": env.str("THROTTLE_REAUTH_RATE", default="10/min"),
    "org_markets": env.str("THROTTLE_ORG_MARKETS_RATE", default="500/hour"),
    "org_reauth": env.str("THROTTLE_ORG_REAUTH_RATE", default="300/hour"),
}
# One tenant's own rate: `scope:<organization id or user id>=<rate>`, comma-separated.
THROTTLE_OVERRIDES = dict(item.split("=", 1) for item in env.list("THROTTLE_OVERRIDES", default=[]) if "=" in item)

# --- Browsers on other origins (django-cors-headers; the preflight answer is serenity.middleware.CorsMiddleware) --
# The API is called with a bearer token, not cookies, so `*` (the original's answer) exposes nothing; a list of
# origins also lets a browser send the session cookie (credentials) from those origins.
CORS_URLS_REGEX = r"^/v2/"
_cors_origins = env.list("CORS_ALLOWED_ORIGINS", default=["*"])
CORS_ALLOW_ALL_ORIGINS = _cors_origins == ["*"]
CORS_ALLOWED_ORIGINS = [] if CORS_ALLOW_ALL_ORIGINS else _cors_origins
CORS_ALLOW_CREDENTIALS = not CORS_ALLOW_ALL_ORIGINS
CORS_ALLOW_METHODS = ["GET", "HEAD", "PATCH", "POST", "OPTIONS", "DELETE"]
CORS_ALLOW_HEADERS = [
    "x-api-key",
    "authorization",
    "origin",
    "x-requested-with",
    "content-type",
    "accept",
    "x-import-api-key",
    "x-client-type",
    "x-trigger-audits",
    "x-view-as-trial",
    "x-view-full-experience",
    "x-promise-token",
    "x-promise-audience",
    "x-request-id",
    "if-none-match",
]
CORS_EXPOSE_HEADERS = ["x-error", "x-request-id", "etag", "retry-after", "location"]
CORS_PREFLIGHT_MAX_AGE = 86400

# --- Callers: IMS user tokens, and the SpaceCat session tokens the original's UI signs in for ------------------
# Session tokens are ES256 JWTs of this issuer, verified with this public key (base64 of an SPKI PEM, the
# original's AUTH_PUBLIC_KEY_B64). Local runs mint their own key pair (var/local-secrets.json); a deployment with
# session tokens on and no key refuses to start.
SESSION_TOKENS_ENABLED = env.bool("SESSION_TOKENS_ENABLED", default=True)
SESSION_TOKEN_ISSUER = env.str("SESSION_TOKEN_ISSUER", default="https://spacecat.experiencecloud.live")
# The audience a session token must name (`aud`), then required in every token. The original's verifier checks
# none; a deployment with session tokens on must name it (or refuses to start), so that a token its sign-in key
# signed for another service is not a caller here. Local runs leave it unset unless given (docs/api.md).
SESSION_TOKEN_AUDIENCE = (
    required("SESSION_TOKEN_AUDIENCE", "").strip()
    if SESSION_TOKENS_ENABLED
    else env.str("SESSION_TOKEN_AUDIENCE", default="").strip()
)
SESSION_TOKEN_PUBLIC_KEY_B64 = (
    required("SESSION_TOKEN_PUBLIC_KEY_B64", _local.get("SESSION_TOKEN_PUBLIC_KEY_B64"))
    if SESSION_TOKENS_ENABLED
    else env.str("SESSION_TOKEN_PUBLIC_KEY_B64", default="")
)
# Local only: the sign-in simulator's private key (never read outside local runs).
SESSION_TOKEN_SANDBOX_PRIVATE_KEY_PEM = _local.get("SESSION_TOKEN_PRIVATE_KEY_PEM", "")

# --- Content-Security-Policy (django-csp). The API's answers are data, never a page: nothing may load or run. The
# pages (the admin, the API docs) load their own scripts, styles and images and nothing from elsewhere; inline
# styles are allowed (the admin and Swagger UI set some), inline scripts are not. serenity.middleware.CspMiddleware
# gives the pages' policy to the paths in CSP_PAGE_PATHS.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'none'"],
    }
}
CSP_PAGES_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
CSP_PAGE_PATHS = ("/admin/", "/api/docs", "/static/")

# --- The API -------------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["serenity.auth.BearerAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["serenity.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "serenity.problems.problem_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
# An entry point's whole budget (Semrush calls and retries, the producer): well under a load balancer's
# typical 60 s, so the answer always reaches the caller; markets not reached in time say so.
REQUEST_DEADLINE_SECONDS = env.float("REQUEST_DEADLINE_SECONDS", default=25.0)
# /api/docs and /api/schema: public in local runs; elsewhere only for a staff session unless set.
API_DOCS_PUBLIC = env.bool("API_DOCS_PUBLIC", default=IS_LOCAL)
SPECTACULAR_SETTINGS = {
    "TITLE": "Serenity market provisioning API",
    "DESCRIPTION": "Onboard AI-search monitoring markets for brands; poll and re-authorise prompt generation jobs.",
    "VERSION": "2.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "markets.onboarding.schemas.register_components",
    ],
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "jobs.models.JobStatus",
        "AcceptedStatusEnum": ["IN_PROGRESS"],
        "BrandStatusEnum": "markets.models.Brand.Status",
        "MarketStatusEnum": "markets.onboarding.dto.MARKET_STATUS_CHOICES",
    },
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
}

# --- Admin login attempts (django-axes): a username from one address is locked out after N failures ----------
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("ADMIN_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = False
AXES_VERBOSE = False
