"""The `semrush` scenario of the bench (see the package's docstring): the fleet's Semrush budget at production's
defaults, spent on work rather than on repeats."""

from collections import Counter

from scripts.bench.config import SIZE, TARGETS
from scripts.bench.harness import Harness
from scripts.stack import Failed


class Semrush(Harness):
    def semrush(self) -> None:
        """A burst of semrush_jobs (DRS answering at once) with the fleet's budget SEMRUSH_MAX_CALLS_PER_SECOND at
        its default and the Semrush simulator admitting semrush_limit calls a second per client pair, as the real
        account does: on one worker process of semrush_threads, then on semrush_processes. Against a baseline of
        the same run: the Semrush calls an unthrottled delivery makes (a small burst with the budget out of reach
        and no limit), so the bound is budget / those calls, in jobs a second. Measured: jobs a second vs that
        bound, calls per COMPLETED job vs the unthrottled count, 429 answers, throttles recorded on the jobs per
        job, attempts spent."""
        from sandbox.drs import controls as drs
        from sandbox.semrush import controls as semrush

        drs.reset()
        drs.set_latency(0)
        semrush.set_rate_limit(None)
        # Each burst's brands have their tags, as every brand's workspace has after its first jobs: a fresh
        # workspace's first jobs create them (up to four calls more each, once per workspace: docs/worker.md).
        self.brands_tagged = True
        unthrottled = self._semrush_burst("semrushfree", max(8, SIZE.semrush_jobs // 8), 1, budget=None)
        per_job = unthrottled["calls"] / unthrottled["completed"]
        self.row(
            f"semrush: calls per delivery unthrottled ({unthrottled['completed']} jobs, the budget out of reach, no "
            "limit at the simulator): the baseline",
            f"{per_job:.2f} calls per job ({self._paths(unthrottled)})",
            None,
            None,
            "",
        )
        try:
            for processes in sorted({1, SIZE.semrush_processes}):
                # The limit is Semrush's for the workers' client pair; the entry points' calls that queue the jobs
                # come before it (a real account's limit is per pair too).
                run = self._semrush_burst(
                    f"semrush{processes}",
                    SIZE.semrush_jobs,
                    processes,
                    budget=SIZE.semrush_budget,
                    before_workers=lambda: semrush.set_rate_limit(SIZE.semrush_limit, per_seconds=1),
                )
                run["peak"] = semrush.rate_peak()  # before the limit is lifted, which starts it over
                semrush.set_rate_limit(None)
                self._semrush_rows(run, processes, per_job)
        finally:
            semrush.set_rate_limit(None)
            self.brands_tagged = False

    def _semrush_burst(self, label: str, jobs: int, processes: int, *, budget: int | None, before_workers=None) -> dict:
        from django.db.models import Sum

        from jobs.models import AsyncJob, JobStatus
        from sandbox.semrush.models import Call

        env = {} if budget is None else {"SEMRUSH_MAX_CALLS_PER_SECOND": str(budget)}
        run = self.burst(label, jobs, processes, SIZE.semrush_threads, before_workers=before_workers, **env)
        ran = AsyncJob.objects.filter(created_at__gte=run["since"])
        calls = Call.objects.filter(at__gte=run["workers_started"])  # the workers' alone: queueing's are before
        run["completed"] = ran.filter(status=JobStatus.COMPLETED).count()
        run["calls"] = calls.count()
        run["refused"] = calls.filter(status=429).count()
        run["paths"] = Counter(
            f"{method} …/{path.rstrip('/').rsplit('/', 1)[-1]}" for method, path in calls.values_list("method", "path")
        )
        run["throttles"] = ran.aggregate(n=Sum("throttles"))["n"] or 0
        if not run["completed"]:
            raise Failed(f"semrush ({label}): no job completed")
        return run

    @staticmethod
    def _paths(run: dict) -> str:
        return ", ".join(f"{path} {n / run['completed']:.2f}" for path, n in sorted(run["paths"].items()))

    def _semrush_rows(self, run: dict, processes: int, unthrottled_per_job: float) -> None:
        bound = SIZE.semrush_budget / unthrottled_per_job
        rate = run["completed"] / run["wall"]
        where = (
            f"semrush: {run['queued']} jobs, DRS at once, SEMRUSH_MAX_CALLS_PER_SECOND {SIZE.semrush_budget}, the "
            f"simulator admitting {SIZE.semrush_limit} calls/s per client pair, {processes} worker "
            f"process{'es' if processes > 1 else ''} of {SIZE.semrush_threads} threads"
        )
        self.row(
            f"{where}: jobs a second (first claim to last completion) vs the budget's bound (budget / unthrottled "
            "calls per job)",
            f"{rate:.2f} jobs/s ({run['completed']} in {run['wall']:.1f} s) vs {bound:.2f}",
            rate / bound,
            TARGETS["semrush_goodput"],
            "≥",
        )
        per_job = run["calls"] / run["completed"]
        self.row(
            "… Semrush calls per COMPLETED job vs unthrottled",
            f"{per_job:.2f} vs {unthrottled_per_job:.2f} ({self._paths(run)})",
            per_job / unthrottled_per_job,
            TARGETS["semrush_calls_per_job"],
            "≤",
        )
        self.row(
            "… answers 429, the most calls Semrush admitted within one second, throttles recorded on the jobs per "
            "job, attempts spent beyond each job's first, deliveries held back",
            f"429 {run['refused']}; at most {run['peak']} of {SIZE.semrush_limit} in one second; "
            f"throttles {run['throttles'] / run['queued']:.2f} per job ({run['throttles']}); "
            f"attempts spent {run['attempts_spent']}; held back "
            f"{sum(n for outcome, n in run['outcomes'].items() if outcome.startswith('held'))}",
            None,
            None,
            "",
        )
        self.cpu_row(run["cpu"], run["wall"])
