"""The stack the soak runs and its processes: started, restarted and signalled from the main thread."""

import os
import queue
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from scripts import stack as stacks
from scripts.soak.config import ENV, SIMULATORS_APP_NAME, WORKER_THREADS, WORKERS, Config
from scripts.soak.model import Generation


def say(text: str) -> None:
    print(text, flush=True)


class Processes:
    stop_watch: threading.Event  # set by each run (harness.py `Soak.run`): ends `watch_readyz`

    def __init__(self, config: Config, *, out=None, ports: dict[str, int] | None = None):
        self.config, self.say = config, out or say
        self.rng = random.Random(config.seed)
        self.stack = stacks.Stack(
            database_url=config.database_url,
            names=("sqs", "sim", "api"),
            env={**ENV, "QUEUE_VISIBILITY_TIMEOUT_SECONDS": str(config.visibility)},
            settings_module="serenity.settings",
            prefix="serenity-soak-",
            first_port=config.first_port,
            ports=ports,
        )
        self.t0 = time.monotonic()
        self.stop_faults = threading.Event()
        self.lock = threading.RLock()
        self.faults: Counter = Counter()
        self.fault_log: list[tuple[float, str, str]] = []  # (wall time, kind, detail)
        self.worker_stops: list[tuple[float, str]] = []  # (wall time, signal): in-flight work was cut off
        self.api_down: list[list[float]] = []  # [from, to] windows of the API's own restarts
        # (user, sent, given up): wall times of each request of the soak's that got no answer (its API process killed)
        self.unanswered: list[tuple[str, float, float]] = []
        self.readyz_failures: list[tuple[float, str]] = []
        self.server_errors: list[tuple[float, int, str, str]] = []  # (wall time, status, problem code, path)
        self.database_faults: list[float] = []  # wall times of terminated backends
        self.harness_receipts: set[str] = set()  # the soak's own receives (SQS delay): not the product's
        self.throttling: threading.Timer | None = None  # turns the latest throttling fault off
        self.incarnations: Counter = Counter()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.generations: list[Generation] = []
        self.starts: queue.Queue = queue.Queue()

    def on_main_thread(self, start) -> None:
        """Run `start` on the main thread and wait for it. Children die with the thread that started them
        (PR_SET_PDEATHSIG, scripts/run_local.py), so a restart must not happen on a thread that ends first."""
        done = threading.Event()
        self.starts.put((start, done))
        done.wait()

    def run_pending_starts(self) -> None:
        while True:
            try:
                start, done = self.starts.get_nowait()
            except queue.Empty:
                return
            try:
                start()
            finally:
                done.set()

    # --- processes ------------------------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        s = self.stack
        s.start_infrastructure(sqs_ledger=self.ledger_path)
        s.gunicorn(
            "simulators",
            "sim",
            access_log=s.var / "sim-access.log",
            GUNICORN_THREADS="12",
            PGAPPNAME=SIMULATORS_APP_NAME,
        )
        self.start_api()
        for name in WORKERS:
            self.start_worker(name)
        s.beat()
        s.setup_django()

    @property
    def ledger_path(self) -> Path:
        return self.stack.var / "sqs-ledger.jsonl"

    def _log(self, name: str) -> Path:
        self.incarnations[name] += 1
        return self.stack.var / f"{name}.{self.incarnations[name]}.log"

    def start_api(self, wait: bool = True) -> None:
        self.procs["api"] = self.stack.gunicorn(
            "api",
            "api",
            access_log=self.stack.var / "api-access.log",
            log_file=self._log("api"),
            wait=wait,
            WEB_CONCURRENCY="2",
            GUNICORN_THREADS="6",
        )

    def start_worker(self, name: str) -> None:
        queues = ",".join(
            (
                os.environ.get("MARKET_JOBS_QUEUE", "serenity-market-jobs"),
                os.environ.get("MAINTENANCE_QUEUE", "serenity-maintenance"),
            )
        )
        self.procs[name] = self.stack.worker(
            name, queues=queues, threads=WORKER_THREADS, log_file=self._log(name), level="INFO"
        )

    def _forget(self, name: str) -> None:
        proc = self.procs[name]
        self.stack.runner.children = [(n, p) for n, p in self.stack.runner.children if p is not proc]

    def _signal(self, name: str, sig: int, grace: float = 20) -> None:
        proc = self.procs[name]
        self._forget(name)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except Exception:  # a SIGTERM that did not end it in time: end it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
