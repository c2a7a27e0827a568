"""The local SQS: moto's server mode, with its per-message retention check made constant-time.

moto 5.2's ReceiveMessage checks each message it returns against the queue's retention period by computing
every attribute of the queue, three of which (ApproximateNumberOf…) walk all the queue's messages, in
flight included. With acks_late a worker keeps every running job's message in flight, so at 512 generations
one receive of 10 messages costs ~0.5 s of the server's CPU, and a worker process could take in no more than
~20 messages a second: the figure measured moto, not the worker (real SQS answers a receive in milliseconds
whatever the queue holds). The check here reads the one attribute it needs; nothing else changes.

With LOCAL_SQS_LEDGER set to a file, every message a receive hands out, every delete and every visibility
change is appended to it as one JSON line (`make soak` counts from it what each receive became).

Usage, as `python -m moto.server`:  python scripts/local_sqs.py -H 127.0.0.1 -p 5055
"""

import json
import os
import sys
import threading
import time

from moto.core.utils import unix_time
from moto.sqs.models import Message, SQSBackend


def _within_retention(self: SQSBackend, queue_name: str, message: Message) -> bool:
    retention_period = int(self.get_queue(queue_name).message_retention_period)  # type: ignore[attr-defined]
    return retention_period + message.sent_timestamp / 1000 > unix_time()  # type: ignore[operator]


def patch() -> None:
    SQSBackend.is_message_valid_based_on_retention_period = _within_retention  # type: ignore[method-assign]
    if path := os.environ.get("LOCAL_SQS_LEDGER"):
        keep_ledger(path)


def keep_ledger(path: str) -> None:
    """Append what happens to each receipt to `path`: `receive` (the message, its receipt, its receive count and,
    on its first receive, its body), `delete` and `visibility` (the receipt, and the new timeout)."""
    lock, out = threading.Lock(), open(path, "a", buffering=1)  # noqa: SIM115 (open for the server's life)

    def write(**line: object) -> None:
        with lock:
            out.write(json.dumps({"t": time.time(), **line}) + "\n")

    receive, delete, change = (
        SQSBackend.receive_message,
        SQSBackend.delete_message,
        SQSBackend.change_message_visibility,
    )

    def receive_message(self: SQSBackend, queue_name: str, *args: object, **kwargs: object) -> list[Message]:
        messages = receive(self, queue_name, *args, **kwargs)  # type: ignore[arg-type]
        for m in messages:
            first = m.approximate_receive_count == 1
            body = m.body if first else None
            write(
                op="receive",
                queue=queue_name,
                id=m.id,
                receipt=m.receipt_handle,
                count=m.approximate_receive_count,
                body=body,
            )
        return messages

    def delete_message(self: SQSBackend, queue_name: str, receipt_handle: str) -> None:
        delete(self, queue_name, receipt_handle)
        write(op="delete", queue=queue_name, receipt=receipt_handle)

    def change_message_visibility(
        self: SQSBackend, queue_name: str, receipt_handle: str, visibility_timeout: int
    ) -> None:
        change(self, queue_name, receipt_handle, visibility_timeout)
        write(op="visibility", queue=queue_name, receipt=receipt_handle, timeout=int(visibility_timeout))

    SQSBackend.receive_message = receive_message  # type: ignore[method-assign]
    SQSBackend.delete_message = delete_message  # type: ignore[method-assign]
    SQSBackend.change_message_visibility = change_message_visibility  # type: ignore[method-assign]


if __name__ == "__main__":
    patch()
    from moto.server import main

    main(sys.argv[1:])
