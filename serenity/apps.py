"""The project app: registers the system checks."""
from django.apps import AppConfig


class SerenityConfig(AppConfig):
    name = "serenity"
    verbose_name = "Serenity"

    def ready(self):
        from serenity import checks  # noqa: F401  (registers the checks)
