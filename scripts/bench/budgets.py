"""The `budgets` scenario of the bench (see the package's docstring): the fleet's outbound budgets under a burst."""

import math

from scripts.bench.config import SIZE, TARGETS
from scripts.bench.harness import Harness
from scripts.stack import Failed


class Budgets(Harness):
    def budgets(self) -> None:
        """2,000 queued jobs on four worker processes of 256 threads, DRS at 10 s, the DRS simulator admitting 200
        invocations at once and DRS_MAX_IN_FLIGHT 200: DRS in flight (sampled) never above 200, no throttling
        answer, no attempt spent, wall time vs the ideal 2,000 / 200 × 10 s. Then the same jobs with the Semrush
        simulator admitting R calls a second per client pair and the fleet's budget just under it: no 429, and
        Semrush's throughput while jobs write vs R."""
        from sandbox.drs import controls as drs
        from sandbox.semrush import controls as semrush

        drs.reset()
        drs.set_latency(SIZE.budget_drs_ms)
        drs.set_concurrency_limit(SIZE.budget_drs_limit)
        try:
            self._drs_budget()
            rate = SIZE.budget_semrush_rate
            semrush.set_rate_limit(rate, per_seconds=1)
            try:
                self._semrush_budget(rate)
            finally:
                semrush.set_rate_limit(None)
        finally:
            drs.set_concurrency_limit(None)

    def _burst(self, label: str, **env) -> dict:
        return self.burst(
            label,
            SIZE.budget_jobs,
            SIZE.budget_processes,
            SIZE.budget_threads,
            DRS_MAX_IN_FLIGHT=str(SIZE.budget_drs_limit),
            DB_POOL_MAX_SIZE=str(SIZE.budget_pool),
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

    def _semrush_budget(self, rate: int) -> None:
        from django.db.models import Max, Min

        from sandbox.semrush.models import Call

        budget = rate - max(1, rate // 20)  # just under the limit, as the production default is (8 of 10)
        run = self._burst("budgetsemrush", SEMRUSH_MAX_CALLS_PER_SECOND=str(budget))
        calls = Call.objects.filter(at__gte=run["since"])
        refused = calls.filter(status=429).count()
        first_write = calls.filter(method="POST", path__contains="/prompts").aggregate(at=Min("at"))["at"]
        writing = calls.filter(at__gte=first_write) if first_write else calls.none()
        span = writing.aggregate(first=Min("at"), last=Max("at"))
        seconds = (span["last"] - span["first"]).total_seconds() if span["first"] else 0.0
        throughput = writing.count() / seconds if seconds else 0.0
        self.row(
            f"budgets: the same {run['queued']} jobs, the Semrush simulator admitting {rate} calls/s per client pair, "
            f"SEMRUSH_MAX_CALLS_PER_SECOND {budget}: Semrush calls a second from the first prompt write to the last "
            "call, vs the simulator's limit",
            f"{throughput:.1f} calls/s ({writing.count()} calls in {seconds:.1f} s; all jobs in {run['wall']:.1f} s)",
            throughput / rate,
            TARGETS["semrush_throughput"],
            "≥",
        )
        self._throttle_rows(run, f"Semrush 429 answers {refused}")
        self.cpu_row(run["cpu"], run["wall"])
        if refused:
            print(f"  note: the Semrush simulator refused {refused} calls", flush=True)

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
            f"{run['peak']['connections']} (pools of {SIZE.budget_pool}); "
            + ", ".join(f"{name} {mb:.0f} MB" for name, mb in run["rss"].items()),
            None,
            None,
            "",
        )
        if run["attempts_spent"]:
            raise Failed(f"budgets: {run['attempts_spent']} attempts spent beyond the first: throttling spent them")
