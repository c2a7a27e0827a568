"""A stopping worker claims nothing its last SQS receives bring: those messages are made visible again at once.

kombu receives with long polls (`SQS_WAIT_TIME_SECONDS`) on the worker's event loop. On a warm shutdown
Celery cancels the consumers and then closes the event loop, and with it the HTTP client, while a long poll
may still be waiting in SQS. SQS does not know the caller left: a message sent in the poll's remaining
seconds is handed to it anyway. Left alone it is received by nobody, invisible for a whole visibility timeout
(QUEUE_VISIBILITY_TIMEOUT_SECONDS), and counted toward the DLQ's receive limit. Run, it would start a DRS call on
a process about to exit, which the stop would hand back and the next worker pay for again.

`FinishLastReceives` is a worker bootstep whose `close` runs first in the shutdown: it stops the receive loop from
starting another poll and unhooks the consumers' callbacks from the channels, then drives the HTTP client until
every poll in flight has its answer (at most `SQS_WAIT_TIME_SECONDS` plus a margin). kombu routes an answer whose
queue has no callback to its release path, which makes those messages visible again at once
(`ChangeMessageVisibility` 0): another worker receives them now, and nothing of them ran here. Its `stop`, after
the consumer, drives anything left the same way. A delivery already received but not yet claimed when the stop
began hands its message back at its start (jobs/services/runner.py, `worker_stopping`).
"""

import logging
import select
import time
from typing import Any

from celery import bootsteps

log = logging.getLogger(__name__)

# Beyond the long poll's own wait: time for SQS to answer and for the release to be sent.
MARGIN_SECONDS = 3.0


def requests_in_flight(client: Any) -> int:
    """How many HTTP requests kombu's curl client has started or queued and not yet answered."""
    return len(client._curls) - len(client._free_list) + len(client._pending)


def finish_requests_in_flight(hub: Any, *, timeout: float) -> int:
    """Drive the event loop's HTTP client until nothing is in flight or `timeout` seconds have passed.
    Returns how many requests were still in flight when it began."""
    client = getattr(hub, "_current_http_client", None)
    if client is None or getattr(client, "_closed", True):
        return 0
    in_flight = requests_in_flight(client)
    deadline = time.monotonic() + timeout
    while requests_in_flight(client) and time.monotonic() < deadline:
        ready = list(client._fds)
        if ready:
            select.select(ready, ready, [], min(0.2, max(deadline - time.monotonic(), 0)))
        else:
            time.sleep(0.05)
        client._timeout_check()  # reads what arrived and runs the answers' callbacks
    left = requests_in_flight(client)
    if left:
        log.warning("SQS receives still unanswered when the worker stopped", extra={"count": left})
    return in_flight


def stop_receiving(consumer: Any) -> int:
    """Keep the consumer's SQS channels from starting another receive (kombu polls only the queues a channel
    lists as active), and unhook those queues' callbacks, so an answer still in flight is released (made visible
    again at once) instead of delivered. Returns how many queues were listed."""
    transport = getattr(getattr(consumer, "connection", None), "transport", None)
    stopped = 0
    for channel in getattr(transport, "channels", None) or []:
        queues = getattr(channel, "_active_queues", None)
        if isinstance(queues, list):
            callbacks = getattr(getattr(channel, "connection", None), "_callbacks", None)
            for queue in queues:
                if isinstance(callbacks, dict):
                    callbacks.pop(queue, None)
            stopped += len(queues)
            queues.clear()
    return stopped


class FinishLastReceives(bootsteps.StartStopStep):
    """Closed first (stops receiving, releases what the last polls bring); stopped after the consumer (releases
    anything answered later) and before the hub."""

    requires = ("celery.worker.components:Hub",)

    def include_if(self, w: Any) -> bool:
        return bool(w.use_eventloop)

    def close(self, w: Any) -> None:
        from celery.worker import state

        if state.should_terminate not in (None, False):  # a cold shutdown runs nothing more; `terminate` releases
            return
        if w.consumer is not None and stop_receiving(w.consumer):
            self._finish(w)

    def stop(self, w: Any) -> None:
        self._finish(w)

    def terminate(self, w: Any) -> None:
        self._finish(w)

    def _finish(self, w: Any) -> None:
        from django.conf import settings

        wait = float(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("wait_time_seconds", 0))
        finish_requests_in_flight(w.hub, timeout=wait + MARGIN_SECONDS)
