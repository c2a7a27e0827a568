"""Job changes, heard for the API's waiting polls: one listening PostgreSQL connection per process wakes the requests
waiting on a job when the job's row changes.

A change notifies `serenity_job_changed` with the job's id from a trigger on `async_jobs` (migration 0007): the
NOTIFY belongs to the changing transaction, so it is delivered at that commit, never before it and never for a
rollback. The listener holds its own connection outside the pool (a LISTEN lives as long as its session), so a
waiting request holds none: it sleeps on an event and takes a pooled connection only to re-read.

Never a missed change. A waiter registers its watch *before* it reads the job, and every time the listener
starts listening, or loses its connection, it wakes every waiter to re-read: a change committed while nobody
listened is then read by the re-read, and one committed after the LISTEN is notified. Until the listener
listens (start-up, a reconnect), and on SQLite (no LISTEN at all), a waiter re-reads every
POLL_WAIT_INTERVAL_SECONDS instead.

A stopping process (serenity/stopping.py) wakes every waiter, which then answers with what it last read: a
graceful restart never waits for, nor cuts, a waiting poll.
"""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from uuid import UUID

from django.conf import settings
from django.db import connections

from serenity import stopping

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

CHANNEL = "serenity_job_changed"  # jobs/migrations/0007_job_change_notify.py
APPLICATION_NAME = "serenity-job-listener"


class Watch:
    """One waiting request's interest in one job: set when the job may have changed (re-read it)."""

    def __init__(self, job_id: str):
        self.job_id = job_id
        self._event = threading.Event()

    def wake(self) -> None:
        self._event.set()

    def wait(self, timeout: float) -> bool:
        """Sleep until woken or `timeout` s passed; True when woken. A wake that came before the call counts."""
        woken = self._event.wait(timeout)
        self._event.clear()
        return woken


class Listener:
    """The process's one LISTEN connection and the watches it wakes. Started by the first watch (so after a
    gunicorn fork, in the process that serves the requests); reconnects with a backoff when its connection is
    lost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[str, set[Watch]] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.listening = threading.Event()
        # Counts, for tests and the metrics: how often it (re)started listening, how many notifications came.
        self.connects = 0
        self.notifications = 0

    @property
    def enabled(self) -> bool:
        return connections["default"].vendor == "postgresql"

    @contextmanager
    def watch(self, job_id: UUID | str) -> Iterator[Watch]:
        """Register interest in `job_id` for the block. Register before reading the job (see the module)."""
        watch = Watch(str(job_id))
        if self.enabled:
            self._start()
        with self._lock:
            self._watches.setdefault(watch.job_id, set()).add(watch)
        try:
            yield watch
        finally:
            with self._lock:
                waiting = self._watches.get(watch.job_id, set())
                waiting.discard(watch)
                if not waiting:
                    self._watches.pop(watch.job_id, None)

    def waiters(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._watches.values())

    def wake(self, job_id: str) -> None:
        with self._lock:
            woken = list(self._watches.get(job_id, ()))
        for watch in woken:
            watch.wake()

    def wake_all(self) -> None:
        with self._lock:
            woken = [watch for watches in self._watches.values() for watch in watches]
        for watch in woken:
            watch.wake()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=APPLICATION_NAME, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop listening and wait for the thread (tests; a process that exits needs not call it)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=10)
        self._thread = None
        self.listening.clear()
        self.connects = self.notifications = 0

    def _connect(self) -> "psycopg.Connection":
        """A connection of its own to the default database, in autocommit (a LISTEN takes effect at once)."""
        import psycopg

        params = connections["default"].get_connection_params()
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        return psycopg.connect(**params, autocommit=True, application_name=APPLICATION_NAME)

    def _run(self) -> None:
        import psycopg

        backoff = 0.0
        while not self._stop.is_set():
            if backoff:
                self._stop.wait(backoff)
                if self._stop.is_set():
                    break
            try:
                conn = self._connect()
            except psycopg.Error as exc:
                log.warning(
                    "job listener cannot connect; waiting polls re-read at an interval",
                    extra={"error": type(exc).__name__},
                )
                backoff = min(max(backoff * 2, 0.5), settings.POLL_LISTENER_MAX_BACKOFF_SECONDS)
                continue
            backoff = 0.0
            try:
                with conn:
                    self._listen(conn)
            except psycopg.Error as exc:
                log.warning("job listener lost its connection; reconnecting", extra={"error": type(exc).__name__})
                backoff = 0.5
            finally:
                self.listening.clear()
                self.wake_all()  # nobody listens now: every waiter re-reads, then re-reads at an interval

    def _listen(self, conn: "psycopg.Connection") -> None:
        conn.execute(f"LISTEN {CHANNEL}")
        self.connects += 1
        self.listening.set()
        # A change committed before the LISTEN took effect was notified to nobody: every waiter re-reads.
        self.wake_all()
        idle = 0.0
        while not self._stop.is_set():
            got_any = False
            for notify in conn.notifies(timeout=1.0):
                got_any = True
                self.notifications += 1
                self.wake(notify.payload)
            idle = 0.0 if got_any else idle + 1.0
            if idle >= settings.POLL_LISTENER_PROBE_SECONDS:
                # A connection dropped without a word (a failover, a partition) delivers nothing and raises
                # nothing while it only listens: a query proves it alive, or raises.
                conn.execute("SELECT 1")
                idle = 0.0


listener = Listener()
stopping.on_stop(listener.wake_all)
