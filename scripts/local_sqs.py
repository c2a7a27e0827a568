"""The local SQS: moto's server mode, with its per-message retention check made constant-time.

moto 5.2's ReceiveMessage checks each message it returns against the queue's retention period by computing
every attribute of the queue, three of which (ApproximateNumberOf…) walk all the queue's messages, in
flight included. With acks_late a worker keeps every running job's message in flight, so at 512 generations
one receive of 10 messages costs ~0.5 s of the server's CPU, and a worker process could take in no more than
~20 messages a second: the figure measured moto, not the worker (real SQS answers a receive in milliseconds
whatever the queue holds). The check here reads the one attribute it needs; nothing else changes.

Usage, as `python -m moto.server`:  python scripts/local_sqs.py -H 127.0.0.1 -p 5055
"""

import sys

from moto.core.utils import unix_time
from moto.sqs.models import Message, SQSBackend


def _within_retention(self: SQSBackend, queue_name: str, message: Message) -> bool:
    retention_period = int(self.get_queue(queue_name).message_retention_period)  # type: ignore[attr-defined]
    return retention_period + message.sent_timestamp / 1000 > unix_time()  # type: ignore[operator]


def patch() -> None:
    SQSBackend.is_message_valid_based_on_retention_period = _within_retention  # type: ignore[method-assign]


if __name__ == "__main__":
    patch()
    from moto.server import main

    main(sys.argv[1:])
