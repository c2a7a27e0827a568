"""Worker heartbeats: every worker process keeps one `worker_heartbeats` row saying which queues it consumes and
when its consumer loop last turned. The probe (WorkersAlive) and the doctor (no_consumer) read them: "does
anything consume this queue" is answered from these rows, never from job leases, which a killed worker leaves
behind looking exactly like a live one's.

A Celery consumer bootstep (installed on the app by jobs/worker/`install`), so it runs in every worker, the suite's
included:

- the consumer's own timer marks the loop alive every WORKER_HEARTBEAT_SECONDS; it fires only while the loop
  turns, so a worker whose loop hangs stops beating although its process lives;
- a small thread writes the row at the same pace while the loop was marked recently: the database write never
  runs inside the consumer loop, where a slow database would hold up every message;
- a warm stop deletes the row (the worker takes no more messages from then on); a killed worker's row stays
  and ages out: it counts as dead after WORKER_SILENT_HEARTBEATS missed beats (jobs/selectors.py), and is
  deleted once silent for WORKER_HEARTBEAT_RETENTION_SECONDS (by the purge, or by the next worker to start).
"""

import logging
import os
import socket
import threading
import time
from datetime import datetime
from typing import Any

from celery import bootsteps
from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs import selectors
from jobs.models import WorkerHeartbeat
from serenity.db import retry_once_on_disconnect

log = logging.getLogger(__name__)


def worker_name() -> str:
    """This worker process, as its heartbeat row names it: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


def heartbeat_write(worker: str, queues: list[str], *, started_at: datetime) -> None:
    """Record that `worker` is alive now and consumes `queues` (insert or update its row)."""
    WorkerHeartbeat.objects.update_or_create(
        worker=worker,
        defaults={"queues": "," + ",".join(sorted(queues)) + ",", "started_at": started_at, "beat_at": timezone.now()},
    )


def heartbeat_forget(worker: str) -> None:
    """Delete `worker`'s row: it consumes nothing any more."""
    WorkerHeartbeat.objects.filter(worker=worker).delete()


def forget_quietly(worker: str) -> None:
    """`heartbeat_forget` on a stopping worker: a failure is logged (the row ages out on its own), and the
    connection is given back."""
    try:
        heartbeat_forget(worker)
    except Exception as exc:
        log.warning("worker heartbeat not deleted on stop", extra={"reason": type(exc).__name__})
    finally:
        connection.close()


def heartbeats_forget_silent(*, now: datetime | None = None) -> int:
    """Delete the rows of every worker silent past the retention window; returns how many. Run by each worker as
    it starts; the purge does the same, row by row (jobs/services/operator.py)."""
    deleted, _ = selectors.heartbeats_silent(now=now).delete()
    return deleted


class HeartbeatWriter:
    """Writes a worker's heartbeat from a thread of its own while the consumer loop keeps calling `tick`."""

    def __init__(self, worker: str, queues: list[str], *, interval: float) -> None:
        self.worker = worker
        self.queues = queues
        self.interval = interval
        self.started_at = timezone.now()
        self._ticked = time.monotonic()
        self._stop = threading.Event()
        self._forget = False
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def tick(self) -> None:
        """Called by the consumer loop's timer: the loop turns."""
        self._ticked = time.monotonic()

    def stop(self, *, forget: bool) -> None:
        """Stop beating; with `forget`, delete the row too. Waits a few seconds at most for the thread."""
        self._forget = forget
        self._stop.set()
        self._thread.join(timeout=10)

    def beat_if_turning(self) -> bool:
        """Write the heartbeat if the consumer loop turned within the last two intervals; True when written."""
        silent = time.monotonic() - self._ticked
        if silent > 2 * self.interval:
            log.warning("consumer loop silent; worker heartbeat withheld", extra={"silent_seconds": int(silent)})
            return False
        self._beat()
        return True

    def _beat(self) -> None:
        try:
            # An upsert of "alive now": safe to repeat, so a connection the database dropped since the last
            # beat (a failover) costs no missed beat.
            retry_once_on_disconnect(heartbeat_write, self.worker, self.queues, started_at=self.started_at)
        except Exception as exc:  # a database hiccup: the next beat tries again; the row ages meanwhile
            log.warning("worker heartbeat not written", extra={"reason": type(exc).__name__})
        finally:
            connection.close()  # held for the write alone, not for the seconds between beats

    def _run(self) -> None:
        try:
            heartbeats_forget_silent()
        except Exception as exc:
            log.warning("silent worker heartbeats not deleted", extra={"reason": type(exc).__name__})
        self._beat()
        while not self._stop.wait(self.interval):
            self.beat_if_turning()
        if self._forget:
            forget_quietly(self.worker)


class WorkerHeartbeatStep(bootsteps.StartStopStep):
    """The consumer bootstep that keeps this worker process's heartbeat row (see the module docstring)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)
    label = "worker heartbeat"

    def __init__(self, c: Any, **kwargs: Any) -> None:
        self.worker = worker_name()
        self.writer: HeartbeatWriter | None = None
        self.timer_entry: Any = None
        super().__init__(c, **kwargs)

    def start(self, c: Any) -> None:
        interval = float(settings.WORKER_HEARTBEAT_SECONDS)
        queues = sorted(queue.name for queue in c.task_consumer.queues)
        self.writer = HeartbeatWriter(self.worker, queues, interval=interval)
        self.timer_entry = c.timer.call_repeatedly(interval, self.writer.tick)
        self.writer.start()

    def stop(self, c: Any) -> None:
        # The consumer stops taking messages: a warm stop begins (shutdown follows once running deliveries
        # are done), or the broker connection was lost (start follows once it is back). No beat meanwhile.
        self._end(forget=False)

    def shutdown(self, c: Any) -> None:
        self._end(forget=True)

    def _end(self, *, forget: bool) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None
        if self.writer is not None:
            self.writer.stop(forget=forget)
            self.writer = None
        elif forget:
            forget_quietly(self.worker)
