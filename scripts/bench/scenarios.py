"""The bench: the harness with every scenario, and each scenario's name to its method."""

from scripts.bench.activate import Activate
from scripts.bench.budgets import Budgets
from scripts.bench.create import Create
from scripts.bench.fairness import Fairness
from scripts.bench.poll import Poll
from scripts.bench.scale import Scale
from scripts.bench.scaleout import Scaleout
from scripts.bench.semrush import Semrush
from scripts.bench.wait import Wait
from scripts.bench.worker import Worker


class Bench(Poll, Create, Activate, Worker, Scale, Fairness, Wait, Budgets, Semrush, Scaleout):
    """The harness and every scenario (one module each)."""
