"""Job handlers by type. Apps register theirs at start-up; the runner dispatches on a job's stored type."""
from typing import Protocol

from jobs.leases import JobRun


class JobHandler(Protocol):
    def run(self, run: JobRun) -> dict:
        """Do the job. Return the result for COMPLETED, or raise RetryableJobError / TerminalJobError."""


_handlers: dict[str, JobHandler] = {}


def register(job_type: str, handler: JobHandler) -> None:
    _handlers[job_type] = handler


def get(job_type: str) -> JobHandler | None:
    return _handlers.get(job_type)
