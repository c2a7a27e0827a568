"""Logging: JSON lines with request, job and trace ids on stderr; token values are redacted before output.
Metrics are EMF lines on stdout (serenity/metrics.py), whatever LOG_LEVEL says. Traces: OpenTelemetry
(serenity/tracing.py), exported with OTLP when configured, to a local file in `make run`."""

from serenity.settings.environment import ENVIRONMENT, VAR_DIR, env

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "serenity.logging.ContextFilter"},
        "redact": {"()": "serenity.logging.RedactingFilter"},
        "metrics_only": {"()": "serenity.logging.MetricsOnly"},
        "no_metrics": {"()": "serenity.logging.NoMetrics"},
    },
    "formatters": {"json": {"()": "serenity.logging.JsonFormatter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "filters": ["no_metrics", "context", "redact"],
        },
        "metrics": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "formatter": "json",
            "filters": ["metrics_only"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # EMF lines are metrics, not chatter: they are emitted whatever LOG_LEVEL says.
        "serenity.metrics": {"level": "INFO", "handlers": ["metrics"]},
        "django.server": {"level": "WARNING"},
        "werkzeug": {"level": "WARNING"},
        "botocore": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # The database pool retries a refused connection in the background with a warning each time; the
        # query that waited for it fails with its own error, logged once by whoever ran it.
        "psycopg.pool": {"level": "ERROR"},
    },
}

# --- Traces (serenity/tracing.py) -----------------------------------------------------------------------------------
# Off only to rule tracing out while investigating something else; the trace id in logs and history needs it on.
TRACING_ENABLED = env.bool("TRACING_ENABLED", default=True)
# The standard OpenTelemetry variables: spans go to this OTLP/HTTP collector when either is set (the exporter reads
# OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT… itself). The service's name in every trace.
TRACES_OTLP_ENDPOINT = env.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", default="") or env.str(
    "OTEL_EXPORTER_OTLP_ENDPOINT", default=""
)
TRACES_SERVICE_NAME = env.str("OTEL_SERVICE_NAME", default="serenity")
# Without a collector: spans appended to this JSON-lines file, which the admin's job page draws as a waterfall.
# `make run` keeps them in var/traces/spans.jsonl; deployments keep none (set an OTLP endpoint).
TRACES_FILE = env.str("TRACES_FILE", default=str(VAR_DIR / "traces" / "spans.jsonl") if ENVIRONMENT == "local" else "")
