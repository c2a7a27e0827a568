"""The worker process's lifecycle around deliveries (Celery signals, connected in jobs.apps):

- database connections: closed if unusable or past their age around every task, so a delivery never
  starts on a connection the database dropped while the worker sat idle;
- a graceful stop: on SIGTERM Celery stops taking messages and waits for running deliveries. Those still
  running WORKER_STOP_GRACE_SECONDS later are handed back (lease released, a fresh message sent), so
  another worker resumes them from their last checkpoint at once instead of after the lease (JOB_LEASE_TTL_SECONDS)
  and the message's visibility (QUEUE_VISIBILITY_TIMEOUT_SECONDS) run out while this process waits to be killed.
"""

import logging
import threading

from celery import signals
from django.conf import settings
from django.db import close_old_connections, connection

from jobs.services.runner import active_deliveries, hand_back

log = logging.getLogger(__name__)


@signals.task_prerun.connect
def _fresh_connections_before(**kwargs: object) -> None:
    close_old_connections()


@signals.task_postrun.connect
def _fresh_connections_after(**kwargs: object) -> None:
    close_old_connections()


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


@signals.worker_shutting_down.connect
def _on_shutting_down(**kwargs: object) -> None:
    def later() -> None:
        # Deliveries that finish within the grace period end normally; what is left is handed back.
        threading.Event().wait(settings.WORKER_STOP_GRACE_SECONDS)
        hand_back_running_deliveries()

    threading.Thread(target=later, name="hand-back-on-stop", daemon=True).start()
