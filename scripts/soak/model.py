"""What the soak drives and what it finds: a generation, an invariant, a run's result."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from scripts.soak.config import Config


@dataclass
class Generation:
    """One generation the soak drives: its own organization, user, brand and market."""

    index: int
    flow: str  # "create" or "activate"
    drs_fault: str | None
    regenerate: bool
    start_at: float
    country: str
    org: str = ""
    brand: str = ""
    brand_name: str = ""
    domain: str = ""
    user: str = ""
    token: str = ""
    job: str | None = None
    market: str | None = None
    reauths: int = 0
    regenerated: int = 0
    recovered: int = 0
    began: float | None = None  # monotonic: its first request
    first_end: float | None = None  # monotonic: its job first seen ended
    first_status: str = ""  # how its job first ended
    outcome: str = "not started"
    notes: list[str] = field(default_factory=list)


@dataclass
class Invariant:
    name: str
    count: int
    bound: str
    holds: bool
    detail: str = ""


@dataclass
class Result:
    config: Config
    started: datetime
    seconds: float
    faults: Counter
    outcomes: Counter
    flows: Counter
    invariants: list[Invariant]
    explained: list[str]
    latencies: dict[int, float] = field(default_factory=dict)  # generation index -> seconds to its first end
    added: dict[str, float] | None = None  # against the fault-free baseline: median, p95, generations

    @property
    def broken(self) -> list[Invariant]:
        return [i for i in self.invariants if not i.holds]
