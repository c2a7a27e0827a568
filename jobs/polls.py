"""A stopping worker finishes the SQS receive it has in flight, so that receive takes no message with it.

kombu receives with long polls (`SQS_WAIT_TIME_SECONDS`) on the worker's event loop. On a warm shutdown
Celery cancels the consumers and then closes the event loop, and with it the HTTP client, while a long poll
may still be waiting in SQS. SQS does not know the caller left: a message sent in the poll's remaining
seconds is handed to it anyway, received by nobody, invisible for a whole visibility timeout (960 s), and
counted toward the DLQ's receive limit.

`FinishPolls` is a worker bootstep stopped after the consumer and before the event loop closes: it drives
the HTTP client until every request in flight has its answer (at most `SQS_WAIT_TIME_SECONDS` plus a
margin). kombu routes an answer whose consumer is gone to its release path, which makes those messages
visible again at once (`ChangeMessageVisibility` 0), so another worker takes them within a poll.
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


class FinishPolls(bootsteps.StartStopStep):
    """Stopped after the consumer (whose cancel routes late answers to kombu's release) and before the hub."""

    requires = ("celery.worker.components:Hub",)

    def include_if(self, w: Any) -> bool:
        return bool(w.use_eventloop)

    def stop(self, w: Any) -> None:
        self._finish(w)

    def terminate(self, w: Any) -> None:
        self._finish(w)

    def _finish(self, w: Any) -> None:
        from django.conf import settings

        wait = float(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("wait_time_seconds", 0))
        finish_requests_in_flight(w.hub, timeout=wait + MARGIN_SECONDS)
