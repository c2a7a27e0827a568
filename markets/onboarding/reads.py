"""A brand's markets as the UI reads them (SPEC §3.1): the Markets tab's list, each market with its latest prompt
generation, and one market by its slice, for the embedded Semrush dashboard. Database reads only: no Semrush call.

A market is listed once its Semrush project exists (a market still being provisioned, or one whose provisioning
failed and is being removed, has none), as the original lists only the projects Semrush holds.
"""

from dataclasses import dataclass

from jobs.models import AsyncJob
from markets import geo
from markets.exceptions import MarketSliceNotFound
from markets.generation.selectors import markets_generation_jobs
from markets.models import Brand, Market
from serenity.auth import Caller


@dataclass(frozen=True)
class MarketRead:
    """A market and its latest generation job (None: it has none)."""

    market: Market
    generation: AsyncJob | None


def _listed(brand: Brand):
    return Market.objects.filter(brand=brand, semrush_project_id__isnull=False).select_related("site")


def _with_generations(*, caller: Caller, brand: Brand, markets: list[Market]) -> list[MarketRead]:
    jobs = markets_generation_jobs(caller=caller, brand=brand, markets=markets)
    return [MarketRead(market=market, generation=jobs.get(market.id)) for market in markets]


def markets_list(*, caller: Caller, brand: Brand) -> list[MarketRead]:
    """The brand's markets (a brand the caller was scoped to), oldest first, each with its latest generation job.
    Two queries whatever the number of markets: the markets, then their jobs (`markets_generation_jobs`)."""
    markets = list(_listed(brand).order_by("created_at", "id"))
    return _with_generations(caller=caller, brand=brand, markets=markets)


def market_get_by_slice(*, caller: Caller, brand: Brand, geo_target_id: int, language_code: str) -> MarketRead:
    """The brand's market of one slice, with its latest generation job. Raises MarketSliceNotFound when the brand
    has none (`geo_target_id` is any positive integer: one that is no country's criterion id names none)."""
    market = None
    if geo_target_id in geo.COUNTRY_GEO_TARGET_IDS:
        market = _listed(brand).filter(geo_target_id=geo_target_id, language_code=language_code).first()
    if market is None:
        raise MarketSliceNotFound()
    (read,) = _with_generations(caller=caller, brand=brand, markets=[market])
    return read
