"""Run a management command exactly as `manage.py` does, SIGTERMing itself twice on the way: once inside its
first DLQ receive (SQS has just handed over messages the command must not leave held), and once more while
Django closes its database connections after the command (a second `kill`, or a closing terminal, while the
command is already on its way out).

Run by tests/jobs/test_command_exit_codes.py as a separate process: `python tests/interrupted_command.py doctor`.
"""

import os
import signal
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
django.setup()

from django.core.management import execute_from_command_line  # noqa: E402
from django.db import connections  # noqa: E402

from jobs.clients import sqs  # noqa: E402

_receive, _close_all = sqs.receive, connections.close_all


def receive(*args, **kwargs):
    batch = _receive(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
    return batch


def close_all():
    os.kill(os.getpid(), signal.SIGTERM)
    _close_all()


if __name__ == "__main__":
    sqs.receive = receive
    connections.close_all = close_all
    execute_from_command_line(["manage.py", *sys.argv[1:]])
