"""Job handlers: the protocol a job type implements and the registry the runner dispatches on. What a
handler gets to work with is a `JobContext` (jobs/context.py).

Apps register their handler at start-up (e.g. markets.apps); `jobs` knows nothing of what they do.
"""

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jobs.context import JobContext
from jobs.models import AsyncJob
from serenity.logging import redact


class Progress(enum.Enum):
    """How far a job got, as its handler reads its checkpoints (for operators and the doctor)."""

    NOT_STARTED = "not started"
    INPUT_PERSISTED = "input persisted"  # the expensive input (e.g. a DRS batch) is stored; effects not done
    EFFECTS_WRITTEN = "effects written"  # the external writes are done; only the finishing step remains


class JobHandler(Protocol):
    def run(self, ctx: JobContext) -> dict[str, Any]:
        """Do the job. Return the result for COMPLETED, or raise JobFailed / RetryLater (LeaseLost comes
        from the context's fenced writes)."""

    def progress(self, job: AsyncJob) -> Progress:
        """How far `job` got, from its checkpoints."""

    def describe(self, job: AsyncJob) -> str:
        """A short, token-free label of what the job is about (e.g. `FR/fr of Acme`), for operators."""


_handlers: dict[str, JobHandler] = {}


def register(job_type: str, handler: JobHandler) -> None:
    _handlers[job_type] = handler


def unregister(job_type: str) -> None:
    _handlers.pop(job_type, None)


def get(job_type: str) -> JobHandler | None:
    return _handlers.get(job_type)


def progress_of(job: AsyncJob) -> Progress:
    handler = get(job.job_type)
    return handler.progress(job) if handler is not None and hasattr(handler, "progress") else Progress.NOT_STARTED


def describe(job: AsyncJob) -> str:
    """The handler's label for `job`, redacted (empty when the handler gives none)."""
    handler = get(job.job_type)
    return redact(handler.describe(job)) if handler is not None and hasattr(handler, "describe") else ""


@dataclass(frozen=True)
class Stranded:
    """Work an app asked for that never became a job (its enqueue failed), as the doctor reports it."""

    subject: str  # e.g. `market <id>`
    detail: str
    action: str  # the one recovery that works


_stranded: dict[str, Callable[[], list[Stranded]]] = {}


def register_stranded(name: str, source: Callable[[], list[Stranded]]) -> None:
    """An app's reader of its stranded work (markets: markets whose generation could not be enqueued)."""
    _stranded[name] = source


def stranded() -> list[Stranded]:
    """Every registered app's stranded work."""
    return [item for source in _stranded.values() for item in source()]
