"""A receive that SQS answers with an error is an empty receive: the worker polls again instead of exiting.

kombu 5.7's async AWS client (`kombu/asynchronous/aws/connection.py`, `_on_list_ready`) turns an SQS answer
that is a 5xx (500, 502, 503) or a timeout (408, 504, curl's 599) into `[]`, where a successful answer is the
parsed dict. Its SQS channel (`Channel._on_messages_ready`) then reads `messages.get("Messages")` from that
list: `AttributeError`, raised on the worker's event loop. When the answer arrives on its socket (a slow error
answer, as from an overloaded SQS) Celery logs "Unrecoverable error" and the whole worker process exits (code 1):
every delivery it was running dies with it, and its job waits until its message's visibility timeout brings it
back (QUEUE_VISIBILITY_TIMEOUT_SECONDS). When it arrives in a timer (an error answered at once), kombu
logs "Error in timer" and that queue's receive loop stops for good: the process lives on, beating its
heartbeat, and never receives again. Real SQS answers 500 or 503 now and then, and an overloaded local SQS
(moto) does so under load.

`install` wraps `kombu.transport.SQS.Channel._on_messages_ready`: an answer that is not a dict logs one
warning (the queue's name, nothing of the answer) and returns 0, exactly as kombu's own "no messages" path
does, so the receive loop polls again after SQS_POLLING_INTERVAL; any other answer goes to kombu's code
unchanged. kombu is pinned in requirements/base.txt; a kombu that fixes this passes dicts only and never
reaches the new branch.
"""

import logging
from typing import Any

from celery import bootsteps
from kombu.transport import SQS

log = logging.getLogger(__name__)

# kombu's own, untyped.
_original = SQS.Channel._on_messages_ready  # type: ignore[attr-defined]


def _on_messages_ready(self: Any, queue: str, qname: str, messages: Any) -> Any:
    if not isinstance(messages, dict):  # kombu's error answer (a 5xx or a timeout), not SQS's parsed reply
        log.warning("SQS receive answered with an error; polling again", extra={"queue": qname})
        return 0
    return _original(self, queue, qname, messages)


def install() -> None:
    """Route kombu's SQS receive answers through `_on_messages_ready` above (idempotent)."""
    SQS.Channel._on_messages_ready = _on_messages_ready  # type: ignore[attr-defined]


def installed() -> bool:
    return SQS.Channel._on_messages_ready is _on_messages_ready  # type: ignore[attr-defined]


class ReceiveErrors(bootsteps.Step):
    """The worker bootstep that installs the wrapper when the worker is built, before its first receive."""

    label = "SQS receive errors"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        install()
