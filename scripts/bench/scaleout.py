"""The `scaleout` scenario of the bench (see the package's docstring): the same work on one worker process and on
two, and fairness across processes."""

from scripts.bench import fit
from scripts.bench.config import SIZE, TARGETS
from scripts.bench.harness import Harness


class Scaleout(Harness):
    def scaleout(self) -> None:
        """512 queued jobs at DRS 60 s on one worker process of 512 threads, then on two of 256: the two-process
        wall vs the one-process wall, the workers' PostgreSQL connections at peak and each process's peak RSS.
        Then organization A's 256 jobs and B's one on two processes of 32 threads, DRS at 10 s: B's job vs the
        same job on the idle pair."""
        from sandbox.drs import controls

        controls.set_latency(SIZE.scaleout_drs_ms)
        jobs, threads = SIZE.scaleout_jobs, SIZE.scaleout_threads
        one = self.burst("scaleone", jobs, 1, threads)
        two = self.burst("scaletwo", jobs, 2, threads // 2)
        pool = fit.pool_per_process(SIZE, 2)
        self.row(
            f"scaleout: {one['queued']} queued jobs, DRS {SIZE.scaleout_drs_ms / 1000:g} s, two worker processes of "
            f"{threads // 2} threads vs one of {threads} (first claim to last completion)",
            f"{two['wall']:.1f} s vs {one['wall']:.1f} s (ideal {SIZE.scaleout_drs_ms / 1000:g} s)",
            two["wall"] / one["wall"],
            TARGETS["scaleout_wall"],
            "≤",
        )
        self.row(
            "… the workers' PostgreSQL connections at peak, both processes together (pg_stat_activity twice a "
            "second; one process alone in brackets)",
            f"{two['peak']['connections']} ({one['peak']['connections']})",
            two["peak"]["connections"] / (2 * pool),
            1.0,
            "≤",
            unit=f"of 2 × {pool}",
        )
        self.row(
            "… each process's peak RSS, two processes (one process)",
            ", ".join(f"{name} {mb:.0f} MB" for name, mb in two["rss"].items()) + f" ({one['rss']['worker-0']:.0f} MB)",
            None,
            None,
            "",
        )
        for label, run in (("two processes", two), ("one process", one)):
            self.cpu_row(run["cpu"], run["wall"], of=f", {label}")
        self._fairness_across_processes()

    def _fairness_across_processes(self) -> None:
        from django.conf import settings
        from django.utils import timezone

        from markets import geo
        from sandbox.drs import controls

        controls.set_latency(SIZE.crossfair_drs_ms)
        since = timezone.now()
        b = self.brand("crossfairB")
        countries = iter(geo.COUNTRY_CODES)
        workers = self.start_workers("crossfair", 2, SIZE.crossfair_threads)
        idle = min(self.one_job_seconds(b, next(countries)) for _sample in range(2))
        self.queue_for_org("crossfairA", SIZE.crossfair_a_jobs)
        behind = self.one_job_seconds(b, next(countries))
        self.wait_drained("scaleout (fairness across processes)", 900, since=since)
        self.stop(*workers)
        self.row(
            f"scaleout: B's one job queued right after A's {SIZE.crossfair_a_jobs}, two worker processes of "
            f"{SIZE.crossfair_threads} threads, DRS {SIZE.crossfair_drs_ms / 1000:g} s, share "
            f"{settings.JOB_ORG_FAIR_SHARE} (queued to completed) vs the same job on the idle pair",
            f"{behind:.1f} s vs {idle:.1f} s",
            behind / idle,
            TARGETS["crossfair_wait"],
            "≤",
        )
