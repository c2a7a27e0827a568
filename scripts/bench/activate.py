"""The `activate` scenario of the bench (see the package's docstring)."""

from scripts.bench.config import SIZE
from scripts.bench.harness import Harness
from scripts.stack import Failed


class Activate(Harness):
    def activate(self) -> None:
        from markets import geo

        b = self.brand("activate")
        countries = [c for c in geo.COUNTRY_CODES if c not in ("US", "FR", "DE")][-SIZE.activate_markets :]
        url = self.markets_url(self.ports["api_on"], b).removesuffix("/markets") + "/activate"
        self.sim_calls.mark()
        self.sqs_calls.mark()
        status, body, seconds = self.post(
            url,
            b["token"],
            {
                "generatePrompts": True,
                **b["brandFields"],
                "markets": [{"market": c, "languageCode": "en"} for c in countries],
            },
        )
        created = sum(1 for m in body.get("markets", []) if m.get("status") == 201)
        if status not in (200, 207) or created != SIZE.activate_markets:
            raise Failed(f"activate answered {status} with {created} of {SIZE.activate_markets} created")
        calls = {**self.sim_calls.since_mark(), **self.sqs_calls.since_mark()}
        self.row(
            f"activate {SIZE.activate_markets} markets with generation (one request)",
            f"{seconds:.1f} s; " + ", ".join(f"{k} {v}" for k, v in calls.items()),
            None,
            None,
            "",
        )
