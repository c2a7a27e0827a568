"""The `budgets` scenario of the bench (see the package's docstring): the fleet's outbound budgets under a burst."""

import math

from scripts.bench import fit
from scripts.bench.config import SIZE, TARGETS
from scripts.bench.harness import Harness
from scripts.stack import Failed


class Budgets(Harness):
    def budgets(self) -> None:
        """budget_jobs queued jobs on budget_processes worker processes of budget_threads, DRS at 10 s, the DRS
        simulator admitting budget_drs_limit invocations at once and DRS_MAX_IN_FLIGHT the same: DRS in flight
        (sampled) never above the limit, no throttling answer, no attempt spent, wall time vs the ideal. (The
        Semrush budget has its own scenario, `semrush`, at production's defaults.)"""
        from sandbox.drs import controls as drs

        drs.reset()
        drs.set_latency(SIZE.budget_drs_ms)
        drs.set_concurrency_limit(SIZE.budget_drs_limit)
        try:
            self._drs_budget()
        finally:
            drs.set_concurrency_limit(None)

    def _burst(self, label: str, **env) -> dict:
        return self.burst(
            label,
            SIZE.budget_jobs,
            SIZE.budget_processes,
            SIZE.budget_threads,
            DRS_MAX_IN_FLIGHT=str(SIZE.budget_drs_limit),
            **env,
        )

    def _drs_budget(self) -> None:
        from sandbox.drs.models import DrsCall

        run = self._burst("budgetdrs")
        limit, drs_s = SIZE.budget_drs_limit, SIZE.budget_drs_ms / 1000
        ideal = math.ceil(run["queued"] / limit) * drs_s
        throttled = DrsCall.objects.filter(received_at__gte=run["since"], outcome="throttled").count()
        where = (
            f"{run['queued']} jobs, DRS {drs_s:g} s, DRS limit {limit} and DRS_MAX_IN_FLIGHT {limit}, "
            f"{SIZE.budget_processes} worker processes of {SIZE.budget_threads} threads"
        )
        self.row(
            f"budgets: {where} (first claim to last completion)",
            f"{run['wall']:.1f} s vs ideal {ideal:g} s",
            run["wall"] / ideal,
            TARGETS["budget_wall"],
            "≤",
        )
        self.row(
            "… DRS invocations in flight at peak (the DRS simulator's count, sampled twice a second)",
            f"{run['peak']['drs']}",
            run["peak"]["drs"] / limit,
            1.0,
            "≤",
            unit=f"of {limit}",
        )
        self._throttle_rows(run, f"DRS throttling answers {throttled}")
        self.cpu_row(run["cpu"], run["wall"])

    def _throttle_rows(self, run: dict, answers: str) -> None:
        held = sum(count for outcome, count in run["outcomes"].items() if outcome.startswith("held"))
        kinds = ", ".join(f"{o} {n}" for o, n in sorted(run["outcomes"].items()) if o.startswith("held"))
        kinds = f" ({kinds})" if kinds else ""
        self.row(
            "… throttling answers, attempts spent beyond each job's first, deliveries held back by the budgets, "
            "jobs' `throttled` events (budget deferrals included)",
            f"{answers}; attempts spent {run['attempts_spent']}; held back {held}{kinds}; throttled events "
            f"{run['throttled_events']}",
            None,
            None,
            "",
        )
        self.row(
            "… the workers' PostgreSQL connections at peak (all processes), each process's peak RSS",
            f"{run['peak']['connections']} (pools of {fit.pool_per_process(SIZE, SIZE.budget_processes)}); "
            + ", ".join(f"{name} {mb:.0f} MB" for name, mb in run["rss"].items()),
            None,
            None,
            "",
        )
        if run["attempts_spent"]:
            raise Failed(f"budgets: {run['attempts_spent']} attempts spent beyond the first: throttling spent them")
