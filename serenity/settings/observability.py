"""Logging: JSON lines with request and job ids on stderr; token values are redacted before output. Metrics
are EMF lines on stdout (serenity/metrics.py), whatever LOG_LEVEL says."""
from serenity.settings.environment import env

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
        "console": {"class": "logging.StreamHandler", "formatter": "json",
                    "filters": ["no_metrics", "context", "redact"]},
        "metrics": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "formatter": "json",
                    "filters": ["metrics_only"]},
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
