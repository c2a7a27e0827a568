"""The `scale` scenario of the bench (see the package's docstring)."""

import json
import math
import statistics
from pathlib import Path

from scripts.bench.config import LAMBDA_MEMORY_MB, SIZE, TARGETS, WORKER_APP_NAME
from scripts.bench.harness import Harness, cpu_seconds, proc_status_field
from scripts.stack import Failed


class Scale(Harness):
    def scale(self) -> None:
        """512 queued jobs, DRS at 60 s, ONE worker process: wall time vs the 60 s ideal, peak memory and
        PostgreSQL connections of the worker, CPU per process, memory per generation in flight vs a Lambda."""
        from django.db import connection
        from django.db.models import Max, Min
        from django.utils import timezone

        from jobs.models import AsyncJob, JobStatus
        from sandbox.drs import controls

        if AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).exists():
            raise Failed("jobs are still IN_PROGRESS before the scale scenario")
        controls.set_latency(SIZE.scale_drs_ms)
        since = timezone.now()
        self.queue_for_org("scale", SIZE.scale_jobs)
        queued = AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).count()
        worker = self.start_worker(self.var / "scale-meter.jsonl", threads=SIZE.scale_concurrency)
        groups = {name: proc.pid for name, proc in self.runner.children if name in ("worker", "simulators", "sqs")}
        self.wait_first_claim(since)
        cpu_before = cpu_seconds(groups)
        peak = {"connections": 0, "in_flight": 0}

        def sample() -> None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [WORKER_APP_NAME])
                peak["connections"] = max(peak["connections"], cursor.fetchone()[0])
            peak["in_flight"] = max(
                peak["in_flight"],
                AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS, lease_token__isnull=False).count(),
            )

        self.wait_drained("scale", 900, sample)
        cpu = {name: used - cpu_before[name] for name, used in cpu_seconds(groups).items()}
        status = Path(f"/proc/{worker.pid}/status").read_text()
        rss_mb = int(proc_status_field(status, "VmHWM")) / 1024
        threads = int(proc_status_field(status, "Threads"))
        self.stop("worker")
        span = AsyncJob.objects.filter(started_at__gte=since).aggregate(
            first=Min("started_at"), last=Max("ended_at"), last_claim=Max("started_at")
        )
        wall = (span["last"] - span["first"]).total_seconds()
        intake_s = (span["last_claim"] - span["first"]).total_seconds()
        ideal = math.ceil(queued / SIZE.scale_concurrency) * SIZE.scale_drs_ms / 1000
        self.row(
            f"scale: {queued} queued jobs, DRS {SIZE.scale_drs_ms / 1000:g} s, one worker process of "
            f"{SIZE.scale_concurrency} threads (first claim to last completion)",
            f"{wall:.1f} s vs ideal {ideal:g} s",
            wall / ideal,
            TARGETS["scale_wall"],
            "≤",
        )
        self.row(
            f"intake: the {queued} queued jobs' first claims, one worker process started as the image starts it "
            f"({SIZE.scale_concurrency} threads, LOG_LEVEL INFO), first claim to last",
            f"{queued / max(intake_s, 1e-3):.1f} claims/s ({queued} in {intake_s:.1f} s)",
            queued / max(intake_s, 1e-3) / TARGETS["intake_claims_per_s"],
            1.0,
            "≥",
            unit=f"of {TARGETS['intake_claims_per_s']} claims/s",
        )
        self.row(
            f"… the worker's peak RSS ({threads} threads at the end)",
            f"{rss_mb:.0f} MB",
            rss_mb / TARGETS["scale_rss_mb"],
            1.0,
            "≤",
            unit=f"of {TARGETS['scale_rss_mb']} MB",
        )
        self.row(
            "… the worker's PostgreSQL connections at peak (pg_stat_activity, sampled twice a second)",
            f"{peak['connections']}",
            peak["connections"] / TARGETS["scale_pg_connections"],
            1.0,
            "≤",
            unit=f"of {TARGETS['scale_pg_connections']}",
        )
        self.cpu_row(cpu, wall)
        per_job_mb = rss_mb / max(1, peak["in_flight"])
        self.row(
            f"cost: worker memory per generation in flight (peak RSS / {peak['in_flight']} in flight) vs one "
            f"Lambda of {LAMBDA_MEMORY_MB} MB per job, both for the whole DRS wait",
            f"{per_job_mb:.2f} MB vs {LAMBDA_MEMORY_MB} MB ({per_job_mb * SIZE.scale_drs_ms / 1e6:.3f} vs "
            f"{LAMBDA_MEMORY_MB * SIZE.scale_drs_ms / 1e6:.1f} GB·s per job)",
            per_job_mb / LAMBDA_MEMORY_MB,
            TARGETS["lambda_memory"],
            "≤",
        )
        runs = [json.loads(line) for line in (self.var / "scale-meter.jsonl").read_text().splitlines()]
        runs = [d for d in runs if d["task"] == "jobs.run"]
        self.row(
            f"… worker CPU and SQL per delivery at this concurrency (median of {len(runs)})",
            f"{statistics.median(d['cpu_ms'] for d in runs):.1f} ms, "
            f"{statistics.median(d['sql'] for d in runs):.0f} statements",
            None,
            None,
            "",
        )
