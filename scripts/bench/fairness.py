"""The `fairness` scenario of the bench (see the package's docstring)."""

import math

from scripts.bench.config import SIZE, TARGETS
from scripts.bench.harness import Harness
from scripts.stack import Failed


class Fairness(Harness):
    def fairness(self) -> None:
        """Capacity 64, DRS at 10 s. B's one job behind A's 256 vs the same job on an idle system; then A's 256
        alone with the fairness rule vs without it (worker restarted in between, start-up excluded)."""
        from django.conf import settings
        from django.db.models import Max, Min
        from django.utils import timezone

        from jobs.models import AsyncJob, JobStatus
        from markets import geo
        from sandbox.drs import controls

        if AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).exists():
            raise Failed("jobs are still IN_PROGRESS before the fairness scenario")
        controls.set_latency(SIZE.fair_drs_ms)
        share = settings.JOB_ORG_FAIR_SHARE
        b = self.brand("fairB")
        countries = iter(geo.COUNTRY_CODES)

        def b_job_seconds() -> float:
            return self.one_job_seconds(b, next(countries))

        self.start_worker(self.var / "fair-meter.jsonl", threads=SIZE.fair_capacity)
        idle = min(b_job_seconds() for _sample in range(2))
        self.queue_for_org("fairA", SIZE.fair_a_jobs)
        behind = b_job_seconds()
        self.wait_drained("fairness (A and B)", 900)
        self.row(
            f"fairness: B's one job queued right after A's {SIZE.fair_a_jobs}, capacity {SIZE.fair_capacity}, DRS "
            f"{SIZE.fair_drs_ms / 1000:g} s, share {share} (queued to completed) vs the same job on an idle system",
            f"{behind:.1f} s vs {idle:.1f} s",
            behind / idle,
            TARGETS["fair_wait"],
            "≤",
        )
        self.stop("worker")

        alone: dict[str, float] = {}
        for rule in ("on", "off", "on", "off"):  # interleaved; each side's best is kept
            since = timezone.now()
            self.queue_for_org(f"alone{rule}", SIZE.fair_a_jobs)
            self.start_worker(
                self.var / "fair-meter.jsonl",
                threads=SIZE.fair_capacity,
                JOB_ORG_FAIR_SHARE=str(share if rule == "on" else 0),
            )
            self.wait_first_claim(since)
            self.wait_drained(f"fairness (A alone, rule {rule})", 900)
            self.stop("worker")
            span = AsyncJob.objects.filter(started_at__gte=since).aggregate(
                first=Min("started_at"), last=Max("ended_at")
            )
            wall = (span["last"] - span["first"]).total_seconds()
            alone[rule] = min(alone.get(rule, wall), wall)
        ideal = math.ceil(SIZE.fair_a_jobs / SIZE.fair_capacity) * SIZE.fair_drs_ms / 1000
        self.row(
            f"fairness: A's {SIZE.fair_a_jobs} jobs alone, with the rule vs without (first claim to last "
            f"completion, best of 2 interleaved; ideal {ideal:g} s)",
            f"{alone['on']:.1f} s vs {alone['off']:.1f} s",
            alone["on"] / alone["off"],
            TARGETS["fair_alone"],
            "≤",
        )
