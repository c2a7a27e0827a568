"""The run: the stack started, the faults and the flows driven, the invariants checked; with its baseline."""

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime

from scripts.soak.config import SETTLE_SECONDS, Config
from scripts.soak.flows import Flows
from scripts.soak.invariants import added_latency
from scripts.soak.model import Result
from scripts.soak.processes import say


class Soak(Flows):
    # --- the run --------------------------------------------------------------------------------------
    def run(self) -> Result:
        started, t0 = datetime.now(UTC), time.monotonic()
        self.say(
            f"--- soak: seed {self.config.seed}, {self.config.jobs} generations, "
            f"{self.config.minutes:g} min of faults, logs in {self.stack.var}"
        )
        self.start()
        self.t0 = time.monotonic()
        self.plan()
        self.stop_watch = threading.Event()
        watcher = threading.Thread(target=self.watch_readyz, daemon=True)
        watcher.start()
        fault_rng = random.Random(self.config.seed * 7919 + 1)
        injector = threading.Thread(target=self.inject_faults, args=(self.schedule(), fault_rng), daemon=True)
        injector.start()
        fault_end = self.t0 + self.config.minutes * 60
        deadline = fault_end + SETTLE_SECONDS
        threads = max(8, min(32, self.config.jobs // 10))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="generation") as pool:
            futures = [pool.submit(self.drive, g, deadline) for g in self.generations]
            last = 0.0
            while not all(f.done() for f in futures):
                if time.monotonic() >= fault_end and not self.stop_faults.is_set():
                    self.say("--- faults stop; settling")
                    self.stop_faults.set()
                if time.monotonic() - last > 30:
                    last = time.monotonic()
                    done = sum(f.done() for f in futures)
                    self.say(
                        f"  {self.now():5.0f} s: {done}/{len(futures)} generations done, "
                        f"{sum(self.faults.values())} faults"
                    )
                self.run_pending_starts()
                time.sleep(0.2)
        self.stop_faults.set()
        while injector.is_alive():
            self.run_pending_starts()
            injector.join(0.2)
        self.quiesce()
        time.sleep(3)  # best-effort invalidations happen just after a job's end
        self.stop_watch.set()
        watcher.join()
        invariants, explained = self.check()
        outcomes = Counter(g.outcome for g in self.generations)
        flows = Counter(g.flow for g in self.generations)
        flows["regenerate"] = sum(g.regenerated for g in self.generations)
        flows["re-authorise"] = sum(g.reauths for g in self.generations)
        flows["regenerate a market left without its job"] = sum(g.recovered for g in self.generations)
        latencies = {
            g.index: g.first_end - g.began
            for g in self.generations
            if g.began is not None and g.first_end is not None and g.first_status == "COMPLETED"
        }
        return Result(
            self.config, started, time.monotonic() - t0, self.faults, outcomes, flows, invariants, explained, latencies
        )

    def quiesce(self) -> None:
        """Faults off: every switch reset (the throttling limits included), both workers and the API up (a fault's
        restart may be pending)."""
        from sandbox.drs import controls as drs
        from sandbox.ims import controls as ims
        from sandbox.semrush import controls as semrush

        with self.lock:
            if self.throttling is not None:
                self.throttling.cancel()
                self.throttling = None
        drs.clear()
        drs.set_concurrency_limit(None)  # not drs.reset(): it would forget the call ledger the invariants read
        ims.reset()
        semrush.reset()  # its rate limit included


def run(config: Config, *, out=say) -> Result:
    """Start the stack, soak it, stop it; the stack's scratch directory is removed when nothing broke. With a
    baseline, the same seed first runs without faults, for each generation's added latency."""
    import shutil

    ports = None
    baseline: Result | None = None
    if config.baseline and config.kinds:
        calm = Soak(replace(config, kinds=(), baseline=False), out=out)
        out("--- the fault-free baseline of the same seed")
        try:
            baseline = calm.run()
        finally:
            calm.stack.stop()
        from django.db import connections

        connections.close_all()  # the next run recreates the database: no connection of this one survives it
        shutil.rmtree(calm.stack.var, ignore_errors=True)
        ports = calm.stack.ports
        out("--- the soak")
    soak = Soak(config, out=out, ports=ports)
    try:
        result = soak.run()
    finally:
        soak.stack.stop()
    if baseline is not None:
        result.added = added_latency(baseline.latencies, result.latencies)
    for line in result.explained:
        out(f"  explained: {line}")
    for invariant in result.invariants:
        out(
            f"  {'ok  ' if invariant.holds else 'FAIL'} {invariant.name}: {invariant.count}"
            + (f" ({invariant.detail})" if invariant.detail else "")
        )
    if not result.broken:
        shutil.rmtree(soak.stack.var, ignore_errors=True)
    else:
        out(f"  logs kept in {soak.stack.var}")
    return result
