"""Fault injection: the seeded schedule and each kind of fault, from outside the product."""

import os
import random
import signal
import threading
import time
import urllib.error
import urllib.request

from scripts import stack as stacks
from scripts.soak.config import (
    DRS_SLOW_MS,
    DRS_TIMEOUT_MS,
    EARLY_FAULTS,
    EXCHANGE_SWITCH_WAIT,
    FAILOVERS_IN_A_ROW,
    FAULT_KINDS,
    READYZ_EVERY,
    READYZ_TIMEOUT,
    SEMRUSH_STALL_MS,
    SIMULATORS_APP_NAME,
    SLOW_FAULTS,
    THROTTLE_DRS_CONCURRENCY,
    THROTTLE_SECONDS,
    THROTTLE_SEMRUSH_PER_SECOND,
    WORKERS,
)
from scripts.soak.model import Generation
from scripts.soak.processes import Processes


class Faults(Processes):
    # --- faults ---------------------------------------------------------------------------------------
    def record_fault(self, kind: str, detail: str = "") -> None:
        with self.lock:
            self.faults[kind] += 1
            self.fault_log.append((time.time(), kind, detail))
        self.say(f"  {self.now():5.1f} s: {kind}" + (f" ({detail})" if detail else ""))

    def schedule(self) -> list[str]:
        """Every kind once first (in a seeded order, but a refusal, which only a job still to start can meet,
        first and a rolling deploy, which takes tens of seconds, last), then weighted draws: a short run still
        sees them all."""
        kinds = list(self.config.kinds)
        if not kinds:
            return []
        self.rng.shuffle(kinds)
        kinds.sort(key=lambda kind: (kind not in EARLY_FAULTS) + (kind in SLOW_FAULTS))
        count = max(len(kinds), int(self.config.minutes * 60 / self.config.fault_every))
        weights = [FAULT_KINDS[k] for k in self.config.kinds]
        return kinds + self.rng.choices(list(self.config.kinds), weights=weights, k=count - len(kinds))

    def inject_faults(self, kinds: list[str], rng: random.Random) -> None:
        """Inject `kinds` in order. The first round (each kind once) is always completed, even past the fault
        window on a slow machine, so that every kind is seen; the rest stops with the window."""
        for index, kind in enumerate(kinds):
            pause = self.config.fault_every * rng.uniform(0.5, 1.5)
            if index < len(self.config.kinds):
                time.sleep(pause)
            elif self.stop_faults.wait(pause):
                return
            try:
                self.inject(kind, rng)
            except Exception as exc:  # the harness keeps going; the invariants will tell
                self.say(f"  fault {kind!r} could not be injected: {exc!r}")

    def inject(self, kind: str, rng: random.Random) -> None:
        from jobs.clients import sqs
        from sandbox.ims import controls as ims
        from sandbox.semrush import controls as semrush

        if kind in ("worker SIGKILL", "worker SIGTERM"):
            name = rng.choice(WORKERS)
            kill = kind == "worker SIGKILL"
            with self.lock:
                self.worker_stops.append((time.time(), "SIGKILL" if kill else "SIGTERM"))
            self._signal(name, signal.SIGKILL if kill else signal.SIGTERM)
            self.record_fault(kind, name)
            time.sleep(rng.uniform(0.5, 3))
            self.on_main_thread(lambda: self.start_worker(name))
        elif kind == "PostgreSQL backends terminated":
            self.record_fault(kind, f"{self.terminate_backends(rng)} backends")
        elif kind == "database failover with warm pools":
            counts = []
            for _ in range(FAILOVERS_IN_A_ROW):
                counts.append(self.terminate_backends(rng, share=1.0))
                time.sleep(1.0)
            self.record_fault(kind, " + ".join(map(str, counts)) + " backends")
        elif kind == "rolling deploy":
            self.rolling_deploy()
            self.record_fault(kind)
        elif kind == "SQS duplicates":
            from jobs.models import AsyncJob, JobStatus
            from jobs.services import job_publish

            live = list(AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).values_list("id", "job_type")[:50])
            # No job running at this moment: copies of the latest job's message, which must be dropped all the same.
            ended = [] if live else list(AsyncJob.objects.order_by("-created_at").values_list("id", "job_type")[:1])
            if live or ended:
                job_id, job_type = rng.choice(live or ended)
                copies = rng.randint(2, 5)
                for _ in range(copies):
                    job_publish(job_id, job_type, delay=rng.choice((0, 0, 2, 5)))
                self.record_fault(kind, f"{copies} copies" + ("" if live else " of an ended job"))
        elif kind == "SQS delay":
            from django.conf import settings

            url = sqs.client().get_queue_url(QueueName=settings.MARKET_JOBS_QUEUE)["QueueUrl"]
            held = sqs.receive(url, max_messages=rng.randint(1, 3), visibility=rng.randint(3, 8))
            with self.lock:
                self.harness_receipts.update(m["ReceiptHandle"] for m in held)
            self.record_fault(kind, f"{len(held)} messages held")
        elif kind == "Semrush 5xx":
            semrush.fail_next(
                rng.randint(1, 3),
                status=rng.choice((500, 502, 503)),
                path=rng.choice(("/prompts", "/tags", "/ai-projects", None)),
            )
            self.record_fault(kind)
        elif kind == "Semrush 429":
            semrush.fail_next(rng.randint(1, 2), status=429, path=rng.choice(("/prompts", None)))
            self.record_fault(kind)
        elif kind == "Semrush timeout":
            semrush.fail_next(1, path="/prompts", method=rng.choice(("GET", "POST")), stall_ms=SEMRUSH_STALL_MS)
            self.record_fault(kind)
        elif kind == "Semrush write answer lost":
            semrush.fail_next(1, status=rng.choice((500, 502, 504)), path="/prompts", method="POST", lose_answer=True)
            self.record_fault(kind)
        elif kind == "IMS 5xx":
            self.wait_exchange_switch_free()
            ims.fail_next_exchanges(1, status=rng.choice((500, 503)))
            self.record_fault(kind)
        elif kind == "IMS exchange answer lost":
            self.wait_exchange_switch_free()
            ims.lose_next_exchange_answers(1, status=500)
            self.record_fault(kind)
        elif kind == "IMS refusal (re-authorisation needed)":
            self.wait_exchange_switch_free()
            ims.fail_next_exchanges(1, status=401)
            self.record_fault(kind)
        elif kind in ("API SIGKILL mid-request", "API restart (SIGTERM)"):
            down = time.monotonic()
            with self.lock:
                self.api_down.append([down, float("inf")])
            self._signal("api", signal.SIGKILL if "SIGKILL" in kind else signal.SIGTERM)
            self.record_fault(kind)
            self.on_main_thread(self.start_api)
            with self.lock:
                self.api_down[-1][1] = time.monotonic()
        elif kind == "throttling (DRS and Semrush)":
            self.throttle()
            self.record_fault(
                kind,
                f"{THROTTLE_SECONDS} s: DRS concurrency {THROTTLE_DRS_CONCURRENCY}, "
                f"Semrush {THROTTLE_SEMRUSH_PER_SECOND}/s per pair",
            )

    def throttle(self) -> None:
        """The simulators' limits on for THROTTLE_SECONDS, then off (by a timer, so the schedule goes on and other
        faults overlap the window). A second throttling fault within the window extends it: only the latest
        timer turns the limits off (under the lock, so an earlier timer never turns off a window just opened)."""
        from sandbox.drs import controls as drs
        from sandbox.semrush import controls as semrush

        timer = threading.Timer(THROTTLE_SECONDS, self.throttling_off)
        timer.daemon = True
        with self.lock:
            if self.throttling is not None:
                self.throttling.cancel()
            drs.set_concurrency_limit(THROTTLE_DRS_CONCURRENCY)
            semrush.set_rate_limit(THROTTLE_SEMRUSH_PER_SECOND, per_seconds=1)
            self.throttling = timer
            timer.start()

    def throttling_off(self) -> None:
        from django.db import connection

        from sandbox.drs import controls as drs
        from sandbox.semrush import controls as semrush

        try:
            with self.lock:
                if self.throttling is not threading.current_thread():
                    return  # a later throttling fault owns the window now, or the faults were quiesced
                self.throttling = None
                drs.set_concurrency_limit(None)
                semrush.set_rate_limit(None)
        finally:
            connection.close()

    def faults_near(self, at: float, seconds: float = 10) -> str:
        """The faults injected within `seconds` of the wall time `at`, for the detail of a broken invariant."""
        with self.lock:
            near = [
                f"{kind} ({t - at:+.1f} s{', ' + detail if detail else ''})"
                for t, kind, detail in self.fault_log
                if abs(t - at) <= seconds
            ]
        return "; ".join(near) or "none"

    def wait_exchange_switch_free(self) -> None:
        """Until no exchange fault is pending (IMS has one exchange switch; arming replaces what it holds), so an
        exchange fault (a refusal, a 5xx, a lost answer) never replaces one armed just before that no exchange
        has met yet."""
        from django.db import connection

        from sandbox.ims.models import Switch

        deadline = time.monotonic() + EXCHANGE_SWITCH_WAIT
        try:
            while time.monotonic() < deadline and not self.stop_faults.is_set():
                if not Switch.objects.filter(name=Switch.EXCHANGE, remaining__gt=0).exists():
                    return
                time.sleep(0.5)
        finally:
            connection.close()

    def rolling_deploy(self) -> None:
        """A deploy as an orchestrator rolls it: each worker in turn gets SIGTERM (a warm shutdown), is started
        again and is consuming before the next one stops; then the API's gunicorn master gets SIGHUP (new
        workers, the old ones finish their requests). The API never stops answering."""
        for name in WORKERS:
            with self.lock:
                self.worker_stops.append((time.time(), "SIGTERM"))
            self._signal(name, signal.SIGTERM, grace=60)
            self.on_main_thread(lambda name=name: self.start_worker(name))
            self.wait_consuming(self.procs[name].pid)
        os.kill(self.procs["api"].pid, signal.SIGHUP)

    def wait_consuming(self, pid: int, timeout: float = 60) -> None:
        """Until the worker process `pid` wrote its first heartbeat (its consumer loop turns)."""
        from django.db import connection

        from jobs.models import WorkerHeartbeat

        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if WorkerHeartbeat.objects.filter(worker__endswith=f":{pid}").exists():
                    return
                time.sleep(0.5)
        finally:
            connection.close()

    def terminate_backends(self, rng: random.Random, share: float = 0.5) -> int:
        """pg_terminate_backend on a random `share` of the product's connections to the soak database (all of
        them: a failover). The harness's own are left alone (it is the observer), and so are the simulators'
        (they stand in for services with databases of their own, which a failover of ours does not touch)."""
        import psycopg

        with psycopg.connect(self.config.database_url, autocommit=True) as conn:
            pids = [
                r[0]
                for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND application_name NOT IN (%s, %s)",
                    (stacks.HARNESS_APP_NAME, SIMULATORS_APP_NAME),
                )
            ]
            count = len(pids) if share >= 1 else (len(pids) + 1) // 2
            chosen = rng.sample(pids, k=count) if pids else []
            for pid in chosen:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with self.lock:
            self.database_faults.append(time.time())
        return len(chosen)

    def arm_drs(self, g: Generation) -> None:
        from sandbox.drs import controls as drs

        if g.drs_fault == "DRS slow":
            drs.set_latency(DRS_SLOW_MS, brand=g.brand_name, remaining=1)
        elif g.drs_fault == "DRS timeout":
            drs.set_latency(DRS_TIMEOUT_MS, brand=g.brand_name, remaining=1)
        elif g.drs_fault == "DRS failure (5xx)":
            drs.set_switch("status_500", brand=g.brand_name, remaining=1)
        if g.drs_fault:
            self.record_fault(g.drs_fault, g.brand_name)

    def watch_readyz(self) -> None:
        url = self.stack.url("api") + "/readyz"
        while not self.stop_watch.is_set():
            at, why = time.monotonic(), None
            try:
                with urllib.request.urlopen(url, timeout=READYZ_TIMEOUT) as response:  # noqa: S310 (local URL)
                    if response.status != 200:
                        why = f"HTTP {response.status}"
            except urllib.error.HTTPError as error:
                why = f"HTTP {error.code}"
            except (urllib.error.URLError, OSError) as error:
                why = type(getattr(error, "reason", error)).__name__
            if why:
                with self.lock:
                    self.readyz_failures.append((at, why))
            self.stop_watch.wait(READYZ_EVERY)
