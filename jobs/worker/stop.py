"""A worker's warm stop: on SIGTERM Celery stops taking messages and waits for running deliveries.

- Nothing new is claimed: what the last SQS receives bring is made visible again at once, unrun
  (jobs/worker/last_receives.py), and a delivery not yet claimed hands its message back (jobs/services/runner.py).
- Within WORKER_STOP_GRACE_SECONDS of the signal, running deliveries go on as usual.
- A delivery waiting on DRS (`JobContext.drained_call`: an LLM generation, paid for per call) keeps waiting, up to
  WORKER_STOP_DRAIN_SECONDS after the signal; past the grace, once its batch is persisted, it hands the job back
  for the writes. Only a call still running at the drain's end is handed back, and made again by the next worker.
- Every other delivery still running at the grace's end is handed back (lease released, its attempt given back,
  a fresh message sent), so another worker resumes it from its last checkpoint at once instead of after the
  lease (JOB_LEASE_TTL_SECONDS) and the message's visibility (QUEUE_VISIBILITY_TIMEOUT_SECONDS) run out while this
  process waits to be killed.

The drain must end inside the platform's stop timeout (ECS: at most 120 s; compose: `stop_grace_period`), with
room for the hand-backs: docs/operations.md, "Stops and deploys".
"""

import logging
import threading
import time
from typing import Any

from celery import bootsteps, signals
from django.conf import settings
from django.db import connection

from jobs.context import worker_stop_begin, worker_stop_reset
from jobs.services.runner import active_deliveries, hand_back

log = logging.getLogger(__name__)

# How often a stopping worker looks for deliveries to hand back between the grace and the drain's end.
LOOK_EVERY_SECONDS = 0.25


def hand_back_running_deliveries(*, reason: str = "worker stopping", spare_drained: bool = False) -> int:
    """Hand back every delivery this process is still running (with `spare_drained`, all but those inside a
    drained call). Returns how many were handed back."""
    handed = 0
    try:
        for ctx in active_deliveries():
            try:
                handed += hand_back(ctx, reason=reason, stopping=True, spare_drained=spare_drained)
            except Exception:  # one job's trouble must not keep the others from being handed back
                log.exception("delivery not handed back", extra={"job_id": str(ctx.id)})
    finally:
        connection.close()
    if handed:
        log.warning("running deliveries handed back on stop", extra={"count": handed, "drain_over": not spare_drained})
    return handed


def hand_back_on_stop(*, grace: float, drain: float, began: float | None = None) -> None:
    """From `began` (monotonic): wait `grace` seconds, then hand back every delivery but those inside a drained
    call, again every LOOK_EVERY_SECONDS (a drained call that ends hands its own job back), and at `drain` seconds
    hand back every delivery left."""
    began = time.monotonic() if began is None else began
    stop = threading.Event()
    stop.wait(max(0.0, min(grace, drain) - (time.monotonic() - began)))
    while time.monotonic() - began < drain:
        hand_back_running_deliveries(spare_drained=True)
        stop.wait(min(LOOK_EVERY_SECONDS, max(0.0, drain - (time.monotonic() - began))))
    hand_back_running_deliveries()


def _on_shutting_down(**kwargs: object) -> None:
    began = time.monotonic()
    worker_stop_begin(at=began)
    in_drained = sum(1 for ctx in active_deliveries() if ctx.in_drained_call)
    log.info(
        "worker stopping: claiming nothing new",
        extra={"running": len(active_deliveries()), "waiting_on_drs": in_drained},
    )
    threading.Thread(
        target=hand_back_on_stop,
        kwargs={
            "grace": float(settings.WORKER_STOP_GRACE_SECONDS),
            "drain": float(settings.WORKER_STOP_DRAIN_SECONDS),
            "began": began,
        },
        name="hand-back-on-stop",
        daemon=True,
    ).start()


class GracefulStop(bootsteps.Step):
    """The worker bootstep that arms the stop (Celery's `worker_shutting_down`)."""

    label = "graceful stop"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        worker_stop_reset()  # a worker built in this process is not stopping (the suite builds several)
        # Connected once per process however many workers it builds (the suite builds several).
        signals.worker_shutting_down.connect(_on_shutting_down, dispatch_uid="jobs.worker.stop")
