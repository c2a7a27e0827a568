"""The project app: registers the system checks and starts tracing (serenity/tracing.py)."""

from django.apps import AppConfig


class SerenityConfig(AppConfig):
    name = "serenity"
    verbose_name = "Serenity"

    def ready(self):
        from django.conf import settings

        from serenity import checks, tracing  # noqa: F401  (importing checks registers them)

        if settings.TRACING_ENABLED:
            tracing.configure(
                service_name=settings.TRACES_SERVICE_NAME,
                otlp_endpoint=settings.TRACES_OTLP_ENDPOINT,
                traces_file=settings.TRACES_FILE,
            )
