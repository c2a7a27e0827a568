"""A worker's warm stop: on SIGTERM Celery stops taking messages and waits for running deliveries. Those still
running WORKER_STOP_GRACE_SECONDS later are handed back (lease released, a fresh message sent), so another
worker resumes them from their last checkpoint at once instead of after the lease (JOB_LEASE_TTL_SECONDS) and the
message's visibility (QUEUE_VISIBILITY_TIMEOUT_SECONDS) run out while this process waits to be killed.

What its last SQS receives bring runs like any delivery (jobs/worker/last_receives.py).
"""

import logging
import threading
from typing import Any

from celery import bootsteps, signals
from django.conf import settings
from django.db import connection

from jobs.services.runner import active_deliveries, hand_back

log = logging.getLogger(__name__)


def hand_back_running_deliveries(*, reason: str = "worker stopping") -> int:
    """Hand back every delivery this process is still running. Returns how many were handed back."""
    handed = 0
    try:
        for ctx in active_deliveries():
            try:
                handed += hand_back(ctx, reason=reason)
            except Exception:  # one job's trouble must not keep the others from being handed back
                log.exception("delivery not handed back", extra={"job_id": str(ctx.id)})
    finally:
        connection.close()
    if handed:
        log.warning("running deliveries handed back on stop", extra={"count": handed})
    return handed


def _on_shutting_down(**kwargs: object) -> None:
    def later() -> None:
        # Deliveries that finish within the grace period end normally; what is left is handed back.
        threading.Event().wait(settings.WORKER_STOP_GRACE_SECONDS)
        hand_back_running_deliveries()

    threading.Thread(target=later, name="hand-back-on-stop", daemon=True).start()


class GracefulStop(bootsteps.Step):
    """The worker bootstep that arms the hand-back on a warm stop (Celery's `worker_shutting_down`)."""

    label = "graceful stop"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        # Connected once per process however many workers it builds (the suite builds several).
        signals.worker_shutting_down.connect(_on_shutting_down, dispatch_uid="jobs.worker.stop")
