"""The `wait` scenario of the bench (see the package's docstring)."""

import json
import math
import re
import statistics
import subprocess
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from scripts.bench.config import API_APP_NAME, POLL_EVERY_S, SIZE, TARGETS
from scripts.bench.harness import Harness, proc_status_field, wrk_binary
from scripts.stack import Failed


class Wait(Harness):
    def wait(self) -> None:
        """The waiting poll (`?wait=N` with If-None-Match) on the flag-on API: how soon a waiting client learns of a
        commit, how many requests a job costs it against a 2 s poller, and 1,000 waits held while wrk measures an
        ordinary poll, with the PostgreSQL connections they take."""
        import http.client
        import threading

        from django.db import transaction

        from jobs import states
        from jobs.models import AsyncJob, JobStatus
        from markets.generation.jobtype import MARKET_GENERATION_JOB_TYPE

        b = self.brand("wait")
        port = self.ports["api_on"]
        auth = self.bearer(b)
        result = {"promptCount": 50, "projectId": "p", "published": True, "verdict": "ship"}

        def make_jobs(count: int, **fields) -> list[str]:
            values = {"status": JobStatus.IN_PROGRESS, "phase": "generating", **fields}
            jobs = [
                AsyncJob(
                    id=uuid.uuid4(),
                    job_type=MARKET_GENERATION_JOB_TYPE,
                    organization_id=b["org"],
                    brand_id=b["brand"],
                    site_id=b["site"],
                    user_id=b["user"],
                    **values,
                )
                for _ in range(count)
            ]
            AsyncJob.objects.bulk_create(jobs)
            return [str(job.id) for job in jobs]

        def path(job_id: str) -> str:
            return f"/v2/orgs/{b['org']}/brands/{b['brand']}/serenity/markets/generation/jobs/{job_id}"

        def get(job_id: str, *, wait: int = 0, etag: str = "", timeout: float = 60) -> tuple[int, dict, bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            try:
                headers = {**auth, **({"If-None-Match": etag} if etag else {})}
                conn.request("GET", path(job_id) + (f"?wait={wait}" if wait else ""), headers=headers)
                response = conn.getresponse()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
            finally:
                conn.close()

        def complete(job_id: str) -> float:
            """The worker's last write, committed; the time just before its COMMIT."""
            with transaction.atomic():
                states.transition(job_id, to=JobStatus.COMPLETED, event="completed", actor="bench", result=result)
                before_commit = time.perf_counter()
            return before_commit

        # 1. COMPLETED commit -> the waiting client's answer.
        ids = make_jobs(SIZE.wait_jobs)
        etags = {}
        for job_id in ids:
            status, headers, _body = get(job_id)
            if status != 200:
                raise Failed(f"the plain poll answered {status}, not 200")
            etags[job_id] = headers["etag"]
        answered: dict[str, float] = {}
        errors: list[str] = []

        def waiter(job_id: str) -> None:
            status, _headers, body = get(job_id, wait=25, etag=etags[job_id])
            answered[job_id] = time.perf_counter()
            if status != 200 or json.loads(body)["status"] != "COMPLETED":
                errors.append(f"{status}")

        threads = [threading.Thread(target=waiter, args=(job_id,), daemon=True) for job_id in ids]
        for thread in threads:
            thread.start()
        time.sleep(2)  # every wait reached the API and waits
        committed = {}
        for job_id in ids:
            committed[job_id] = complete(job_id)
            time.sleep(0.02)
        for thread in threads:
            thread.join(timeout=60)
        if errors or len(answered) != len(ids):
            raise Failed(f"waiting polls answered {errors[:5]} ({len(answered)} of {len(ids)} answered)")
        latencies = sorted((answered[job_id] - committed[job_id]) * 1000 for job_id in ids)
        p50 = statistics.median(latencies)
        p95 = latencies[min(len(latencies) - 1, math.ceil(0.95 * len(latencies)) - 1)]
        self.row(
            f"wait: COMPLETED committed -> a waiting client's 200, over {len(ids)} jobs, p50 / p95 (a 2 s poller: "
            f"{POLL_EVERY_S * 500:.0f} ms on average, up to {POLL_EVERY_S * 1000:.0f} ms)",
            f"{p50:.1f} ms / {p95:.1f} ms",
            p95 / TARGETS["wait_p95_ms"],
            1.0,
            "≤",
            unit=f"of {TARGETS['wait_p95_ms']} ms",
        )

        # 2. Requests per job: one job of wait_job_s seconds with the worker's phases, waited for and polled.
        (job_id,) = make_jobs(1, phase="queued")
        counts = {"wait": 0, "poll": 0}

        def waiting_client() -> None:
            etag = ""
            while True:
                counts["wait"] += 1
                status, headers, body = get(job_id, wait=20 if etag else 0, etag=etag)
                if status == 200:
                    if json.loads(body)["status"] != "IN_PROGRESS":
                        return
                    etag = headers["etag"]

        def polling_client() -> None:
            while True:
                counts["poll"] += 1
                _status, _headers, body = get(job_id)
                if json.loads(body)["status"] != "IN_PROGRESS":
                    return
                time.sleep(POLL_EVERY_S)

        clients = [threading.Thread(target=client, daemon=True) for client in (waiting_client, polling_client)]
        for client in clients:
            client.start()
        time.sleep(0.2)

        def phase(name: str) -> None:
            AsyncJob.objects.filter(id=job_id).update(phase=name, updated_at=datetime.now(UTC))

        phase("generating")  # a delivery took it; DRS answers after wait_job_s
        time.sleep(SIZE.wait_job_s)
        for name, pause in (("generated", 0.05), ("writing", 0.15), ("written", 0.1), ("published", 0.05)):
            phase(name)
            time.sleep(pause)
        complete(job_id)
        for client in clients:
            client.join(timeout=60)
        self.row(
            f"wait: requests per job of {SIZE.wait_job_s:g} s (its phases as a worker writes them), waiting "
            f"(?wait=20) vs polling every {POLL_EVERY_S:g} s",
            f"{counts['wait']} vs {counts['poll']}",
            counts["wait"] / TARGETS["wait_requests"],
            1.0,
            "≤",
            unit=f"of {TARGETS['wait_requests']} requests",
        )

        # 3. wait_many waits held at once, and an ordinary poll's throughput beside them.
        wrk = wrk_binary()
        (ordinary,) = make_jobs(1)
        url = f"http://127.0.0.1:{port}{path(ordinary)}"
        wrk_argv = [wrk, "-t2", f"-c{SIZE.wrk_connections}", f"-d{SIZE.wrk_seconds}s", "--latency"]
        wrk_argv += [arg for name, value in auth.items() for arg in ("-H", f"{name}: {value}")]

        def rate() -> float:
            out = subprocess.run([*wrk_argv, url], capture_output=True, text=True, check=True).stdout
            found = re.search(r"Requests/sec:\s+([\d.]+)", out)
            if "Non-2xx or 3xx" in out or found is None:
                raise Failed(f"wrk's run against the ordinary poll failed:\n{out}")
            return float(found.group(1))

        api = next(proc for name, proc in self.runner.children if name == "api (flag on)")

        def api_workers() -> dict[str, int]:
            """RSS (kB) and threads of the flag-on API's gunicorn workers, summed."""
            children = Path(f"/proc/{api.pid}/task/{api.pid}/children").read_text().split()
            total = {"rss": 0, "threads": 0}
            for pid in children:
                status = Path(f"/proc/{pid}/status").read_text()
                total["rss"] += int(proc_status_field(status, "VmRSS"))
                total["threads"] += int(proc_status_field(status, "Threads"))
            return total

        rate()  # warm-up
        alone = rate()
        before = api_workers()
        many = make_jobs(SIZE.wait_many)
        outcomes: list[tuple[int, float]] = []
        hold = SIZE.wrk_seconds + 12

        def held_wait(job_id: str) -> None:
            started = time.monotonic()
            try:
                status, _headers, _body = get(job_id, wait=hold, etag="*", timeout=hold + 30)
            except OSError:
                status = 0
            outcomes.append((status, time.monotonic() - started))

        waits = [threading.Thread(target=held_wait, args=(job_id,), daemon=True) for job_id in many]
        for thread in waits:
            thread.start()
        time.sleep(4)  # every wait reached the API
        peak = {"pool": 0, "listeners": 0}
        sampling = threading.Event()

        def sample() -> None:
            from django.db import connections

            while not sampling.is_set():
                with connections["default"].cursor() as cursor:
                    cursor.execute(
                        "SELECT count(*) FILTER (WHERE application_name = %s), "
                        "count(*) FILTER (WHERE application_name = 'serenity-job-listener') "
                        "FROM pg_stat_activity WHERE datname = current_database()",
                        [API_APP_NAME],
                    )
                    pool, listeners = cursor.fetchone()
                peak.update(pool=max(peak["pool"], pool), listeners=max(peak["listeners"], listeners))
                time.sleep(0.5)
            connections["default"].close()

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        beside = rate()
        during = api_workers()
        sampling.set()
        sampler.join()
        for thread in waits:
            thread.join(timeout=hold + 60)
        alone = max(alone, rate())  # the better of before and after: the ratio errs against the waits
        held = [elapsed for status, elapsed in outcomes if status == 304 and elapsed >= hold - 1]
        failed = [status for status, _elapsed in outcomes if status not in (200, 304)]
        self.row(
            f"wait: {SIZE.wait_many} waiting polls at once on the API (2 processes): answered 304 at the end of "
            f"their {hold} s wait / answered early / errors",
            f"{len(held)} / {len(outcomes) - len(held) - len(failed)} / {len(failed)}",
            None,
            None,
            "",
        )
        self.row(
            f"wait: an ordinary poll's throughput beside {SIZE.wait_many} waits vs without them, the better of "
            f"before and after (wrk, {SIZE.wrk_connections} connections, {SIZE.wrk_seconds} s each)",
            f"{beside:.0f} req/s vs {alone:.0f} req/s",
            beside / alone,
            TARGETS["wait_throughput"],
            "≥",
        )
        grown = max(1, during["threads"] - before["threads"])
        self.row(
            f"wait: the API's 2 workers while they hold the {SIZE.wait_many} waits: RSS and threads, before -> during",
            f"{before['rss'] / 1024:.0f} MB, {before['threads']} threads -> {during['rss'] / 1024:.0f} MB, "
            f"{during['threads']} threads ({(during['rss'] - before['rss']) / grown:.0f} kB per thread added)",
            None,
            None,
            "",
        )
        budget = 2 * SIZE.api_pool + 2
        self.row(
            f"wait: the API's PostgreSQL connections during the {SIZE.wait_many} waits (pooled + listeners, "
            "pg_stat_activity twice a second) vs the pools' size plus one listener per process",
            f"{peak['pool']} + {peak['listeners']}",
            (peak["pool"] + peak["listeners"]) / budget,
            1.0,
            "≤",
            unit=f"of {budget}",
        )
        # The jobs this scenario made stand for nothing a worker could run (no grant, no message): gone, or beat's
        # sweeper would send them a minute later and the next scenario's workers would take them for waiting work
        # (another organization's: the fairness rule holds the next burst back behind them).
        AsyncJob.objects.filter(brand_id=b["brand"]).delete()
        if failed or len(held) != SIZE.wait_many:
            raise Failed(f"of {SIZE.wait_many} waits, {len(held)} waited to their end; errors {failed[:5]}")
