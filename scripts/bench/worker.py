"""The `worker` scenario of the bench (see the package's docstring)."""

import json
import math
import statistics

from scripts.bench.config import SIZE, TARGETS
from scripts.bench.harness import Harness, cpu_seconds


class Worker(Harness):
    def worker(self) -> None:
        """Every queued job, DRS at 1 s, one worker with 8 threads: wall time vs the ideal."""
        from django.db.models import Max, Min

        from jobs.models import AsyncJob, JobStatus
        from sandbox.drs import controls

        if not AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).exists():  # run alone: queue its own
            self.queue_jobs(self.brand("worker"), SIZE.create_samples + SIZE.activate_markets)
        queued = AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).count()
        since = AsyncJob.objects.order_by("created_at").values_list("created_at", flat=True).first()
        controls.set_latency(SIZE.drs_latency_ms)
        meter = self.var / "worker-meter.jsonl"
        self.sim_calls.mark()
        self.start_worker(meter)
        groups = {name: proc.pid for name, proc in self.runner.children if name in ("worker", "simulators", "sqs")}
        self.wait_first_claim(since)  # the worker's start-up excluded
        cpu_before = cpu_seconds(groups)
        self.wait_drained("worker", 300)
        cpu = {name: used - cpu_before[name] for name, used in cpu_seconds(groups).items()}
        span = AsyncJob.objects.aggregate(first=Min("started_at"), last=Max("ended_at"))
        wall = (span["last"] - span["first"]).total_seconds()
        ideal = math.ceil(queued / SIZE.worker_threads) * SIZE.drs_latency_ms / 1000
        self.row(
            f"worker: {queued} queued jobs, DRS {SIZE.drs_latency_ms} ms, {SIZE.worker_threads} threads "
            "(first claim to last completion)",
            f"{wall:.1f} s vs ideal {ideal:g} s",
            wall / ideal,
            TARGETS["worker_wall"],
            "≤",
        )
        self.cpu_row(cpu, wall)
        deliveries = [json.loads(line) for line in meter.read_text().splitlines()]
        runs = [d for d in deliveries if d["task"] == "jobs.run"]
        self.row(
            f"… one delivery's wall time (median), DRS's {SIZE.drs_latency_ms / 1000:g} s included",
            f"{statistics.median(d['wall_ms'] for d in runs):.0f} ms",
            None,
            None,
            "",
        )
        cpu = statistics.median(d["cpu_ms"] for d in runs)
        sql = statistics.median(d["sql"] for d in runs)
        bare = self.bare_view_ms()
        self.row(
            f"worker CPU per delivery, external calls excluded (median of {len(runs)}), vs one request to the "
            "bare view in process (best of 5 rounds of 100): a yardstick of this machine's speed",
            f"{cpu:.1f} ms vs {bare:.2f} ms",
            cpu / bare,
            TARGETS["worker_cpu_x_bare"],
            "≤",
        )
        self.row(
            f"worker CPU per delivery (median of {len(runs)}), against the {TARGETS['worker_cpu_ms']} ms target",
            f"{cpu:.1f} ms",
            cpu / TARGETS["worker_cpu_ms"],
            1.0,
            "≤",
            unit=f"of {TARGETS['worker_cpu_ms']} ms",
        )
        slots = statistics.median(d.get("semrush_slots", 0) for d in runs)
        fences = statistics.median(d.get("semrush_fences", 0) for d in runs)
        self.row(
            f"worker SQL statements per delivery (median, max {max(d['sql'] for d in runs)}), beside the Semrush "
            f"rate budget's (one reserving the phase's calls, one more per call beyond them: median {slots:.0f}) and "
            f"two fence statements per Semrush write (median {fences:.0f})",
            f"{sql:.0f}",
            sql / TARGETS["worker_sql"],
            1.0,
            "≤",
            unit=f"of the {TARGETS['worker_sql']} target",
        )
        calls = self.sim_calls.since_mark()
        self.row(
            "worker: external calls per job",
            ", ".join(f"{k} {v / queued:.1f}" for k, v in calls.items()),
            None,
            None,
            "",
        )
        self.stop("worker")
