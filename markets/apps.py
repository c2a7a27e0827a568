"""Markets: organizations, brands, sites, markets, onboarding and the market-generation job handler."""

from django.apps import AppConfig


class MarketsConfig(AppConfig):
    name = "markets"

    def ready(self):
        from jobs import handlers
        from markets.generation import handler  # noqa: F401  (registers the market-generation job handler)
        from markets.generation.selectors import markets_not_enqueued

        handlers.register_stranded("markets", markets_not_enqueued)
