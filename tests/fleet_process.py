"""One more process of the fleet, for tests that need two OS processes racing on the same database: it sets
Django up on the test database named by DATABASE_URL, sleeps until a start time shared with the test (so the
processes overlap), runs threads doing one thing, and prints a JSON line of what they got.

    fleet_process.py semrush START THREADS CALLS BEARER   each thread: CALLS `publish_status` calls under the
                                                          Semrush rate budget of the `semrush` pair
    fleet_process.py claim START THREADS JOB_ID...        the threads claim the jobs (each tries every job, in its
                                                          own order) under the DRS budget

Run by tests/markets/clients/test_semrush_budget.py and tests/jobs/test_drs_budget.py.
"""

import json
import os
import sys
import threading
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
django.setup()

from django.db import connection  # noqa: E402

from jobs.leases import lease_claim  # noqa: E402
from markets.clients.semrush import SemrushClient  # noqa: E402
from serenity.clients.http import Throttled  # noqa: E402


def semrush_calls(calls: int, bearer: str) -> dict:
    got = {"ok": 0, "throttled": 0}
    for _ in range(calls):
        try:
            SemrushClient(bearer, pair="semrush").publish_status(project_id="p")
            got["ok"] += 1
        except Throttled:
            got["throttled"] += 1
    return got


def claims(job_ids: list[str]) -> dict:
    won = sum(lease_claim(job_id, worker=f"p{os.getpid()}") is not None for job_id in job_ids)
    return {"claimed": won}


def main(kind: str, start: float, threads: int, args: list[str]) -> None:
    results: list[dict] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        try:
            connection.ensure_connection()  # connected first: the race starts at the first claim, not a connect
            time.sleep(max(0.0, start - time.time()))  # every thread of both processes wakes at the same moment
            if kind == "semrush":
                got = semrush_calls(int(args[0]), args[1])
            else:
                order = args[n % len(args) :] + args[: n % len(args)]
                got = claims(order if n % 2 == 0 else list(reversed(order)))
            with lock:
                results.append(got)
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    [t.start() for t in workers]
    [t.join() for t in workers]
    total = {key: sum(r[key] for r in results) for key in results[0]} if results else {}
    print(json.dumps({"threads": len(results), **total}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
