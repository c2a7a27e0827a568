"""The `create` scenario of the bench (see the package's docstring)."""

import statistics

from scripts.bench.config import SIZE, TARGETS
from scripts.bench.harness import Harness
from scripts.stack import Failed


class Create(Harness):
    def create_markets(self) -> None:
        """Sequential creates, alternating the async path (flag on) and the old path (flag off)."""
        from markets import geo

        on, off = self.brand("create-on"), self.brand("create-off")
        countries = [c for c in geo.COUNTRY_CODES if c not in ("US", "FR", "DE")]
        latencies: dict[str, list[float]] = {"on": [], "off": []}
        calls: dict[str, dict[str, int]] = {}
        for b, port, generate in ((on, self.ports["api_on"], True), (off, self.ports["api_off"], False)):
            self.post(
                self.markets_url(port, b),
                b["token"],  # warm-up
                {"market": "US", "languageCode": "en", "generatePrompts": generate, **b["brandFields"]},
            )
        for path, b, port, generate in (
            ("on", on, self.ports["api_on"], True),
            ("off", off, self.ports["api_off"], False),
        ):
            self.sim_calls.mark()
            self.sqs_calls.mark()
            for country in (
                countries[: SIZE.create_samples] if path == "on" else countries[100 : 100 + SIZE.create_samples]
            ):
                status, body, seconds = self.post(
                    self.markets_url(port, b),
                    b["token"],
                    {"market": country, "languageCode": "en", "generatePrompts": generate, **b["brandFields"]},
                )
                if status != 201:
                    raise Failed(f"create market ({path}) answered {status}: {body}")
                latencies[path].append(seconds)
            calls[path] = {**self.sim_calls.since_mark(), **self.sqs_calls.since_mark()}
        on_median, off_median = statistics.median(latencies["on"]), statistics.median(latencies["off"])
        self.row(
            f"create market: async path (flag on) vs old path (flag off), median of {SIZE.create_samples} sequential",
            f"{on_median * 1000:.0f} ms vs {off_median * 1000:.0f} ms",
            on_median / off_median,
            TARGETS["create"],
            "≤",
        )
        for path in ("on", "off"):
            per_market = ", ".join(f"{name} {count / SIZE.create_samples:.1f}" for name, count in calls[path].items())
            self.row(
                f"create market, external calls per market ({'async' if path == 'on' else 'old'} path)",
                per_market,
                None,
                None,
                "",
            )
