"""A Celery worker that SIGKILLs itself at a chosen point of a market-generation job, or (`never`) an
ordinary worker process for a test to stop with a signal.

Run by tests/markets/test_worker_crash.py as a separate process: the kill is exactly what a crashed
host looks like to the queue and the database (no ack, no cleanup, a lease left behind).
"""

import os
import signal
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
django.setup()

from django.conf import settings  # noqa: E402

from jobs.context import JobContext  # noqa: E402
from markets.clients.semrush import SemrushClient  # noqa: E402
from markets.generation import handler  # noqa: E402
from serenity.celery import app  # noqa: E402

POINTS = (
    "after_claim",
    "after_drs_persisted",
    "after_write_before_checkpoint",
    "after_checkpoint_before_publish",
    "never",
)


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def crash_at(point: str) -> None:
    if point == "never":
        return
    if point == "after_claim":
        handler.MarketGenerationHandler.run = lambda self, run: die()
    elif point in ("after_drs_persisted", "after_checkpoint_before_publish"):
        target = "generated" if point == "after_drs_persisted" else "written"
        original = JobContext.checkpoint

        def checkpoint(self, *, phase=None, **values):
            original(self, phase=phase, **values)
            if phase == target:
                die()

        JobContext.checkpoint = checkpoint
    elif point == "after_write_before_checkpoint":
        original_write = SemrushClient.write_prompts

        def write_prompts(self, **kwargs):
            original_write(self, **kwargs)
            die()

        SemrushClient.write_prompts = write_prompts
    else:
        raise SystemExit(f"unknown crash point {point!r}; one of {POINTS}")


if __name__ == "__main__":
    crash_at(sys.argv[1])
    # TEST_WORKER_QUEUES: a comma-separated list, for a worker that also consumes the maintenance queue.
    queues = os.environ.get("TEST_WORKER_QUEUES") or settings.MARKET_JOBS_QUEUE
    app.worker_main(
        [
            "worker",
            "-P",
            "threads",
            "-c",
            "1",
            "-Q",
            queues,
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "WARNING",
        ]
    )
