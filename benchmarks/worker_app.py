"""The production Celery app with a per-delivery meter: `celery -A benchmarks.worker_app worker …`.

For every task it appends one JSON line to $BENCH_WORKER_METER: the thread's CPU time (waiting on IMS,
Semrush, DRS or the database costs none), its wall time and the SQL statements it sent (the Semrush rate budget's
slots, one per Semrush request, counted apart: `semrush_slots`; so is the fence against a market's deletion, two per
Semrush write request: `semrush_fences`). The lease heartbeat
runs in its own thread and is not counted (it fires only during calls longer than its interval).

With $BENCH_WORKER_PROFILE set (a path), each delivery's thread is also profiled (cProfile, that thread alone) and
the deliveries' statistics, merged, are written there (pstats) every 50 deliveries: what a delivery's CPU is spent
on (docs/benchmarks.md, "What made the difference").
"""

import cProfile
import json
import os
import pstats
import threading
import time

from celery import signals
from django.db import connection

from serenity.celery import app

__all__ = ["app"]

_current = threading.local()
_write_lock = threading.Lock()
_PROFILE = os.environ.get("BENCH_WORKER_PROFILE", "")
_profiles: list[cProfile.Profile] = []


@signals.task_prerun.connect
def _start(task_id=None, task=None, **kwargs):
    statements = [0, 0, 0]

    def count(execute, sql, params, many, context):
        if "semrush_rate_budgets" in sql:
            statements[1] += 1
        elif '"generation_write_lease"' in sql and sql.startswith('UPDATE "markets_market"'):
            statements[2] += 1
        else:
            statements[0] += 1
        return execute(sql, params, many, context)

    wrapper = connection.execute_wrapper(count)
    wrapper.__enter__()
    if _PROFILE:
        _current.profile = cProfile.Profile(time.thread_time)  # CPU, not waits
        _current.profile.enable()
    _current.meter = (time.thread_time(), time.perf_counter(), statements, wrapper)


@signals.task_postrun.connect
def _stop(task_id=None, task=None, retval=None, **kwargs):
    meter = getattr(_current, "meter", None)
    if meter is None:
        return
    cpu0, wall0, statements, wrapper = meter
    profile = getattr(_current, "profile", None)
    if profile is not None:
        profile.disable()
        _current.profile = None
    wrapper.__exit__(None, None, None)
    _current.meter = None
    line = json.dumps(
        {
            "task": task.name if task else "",
            "outcome": str(retval),
            "cpu_ms": (time.thread_time() - cpu0) * 1000,
            "wall_ms": (time.perf_counter() - wall0) * 1000,
            "sql": statements[0],
            "semrush_slots": statements[1],
            "semrush_fences": statements[2],
        }
    )
    with _write_lock, open(os.environ["BENCH_WORKER_METER"], "a") as out:
        out.write(line + "\n")
        if profile is not None:
            _profiles.append(profile)
            if len(_profiles) % 50 == 0 or len(_profiles) in (8, 16, 32, 64, 65):
                pstats.Stats(*_profiles).dump_stats(_PROFILE)
