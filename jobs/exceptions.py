"""What a job handler raises to tell the runner how an attempt ended, and the job services' refusals.

Every attempt error is a `JobError` with a `code` and a `message` (the stored, operator-facing text):
`JobFailed` ends the job FAILED, `RetryLater` keeps it IN_PROGRESS for a delayed retry, `Throttled` sends
it again later without spending its attempt (back-pressure), `LeaseLost` stops a delivery that no longer owns
the job.
"""

from serenity.problems import DomainError


class JobError(Exception):
    """An attempt of a job ended before its handler returned."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class JobFailed(JobError):
    """The job cannot succeed as it stands: it ends FAILED with this code.

    `needs_reauth`: only a re-authorisation by the requester can bring it back. `retryable`: a later
    re-run may succeed (the condition was temporary, e.g. retries exhausted during an outage).
    """

    def __init__(self, code: str, message: str, *, needs_reauth: bool = False, retryable: bool = False):
        super().__init__(code, message)
        self.needs_reauth = needs_reauth
        self.retryable = retryable


class RetryLater(JobError):
    """The attempt failed for a reason that may pass (timeouts, 429/5xx, DRS `retryable`): the job stays
    IN_PROGRESS and its message comes back after a backoff, within the attempt budget."""


class Throttled(JobError):
    """A service refused a call to slow us down (Lambda throttling, Semrush 429): back-pressure, not failure.
    The attempt is given back, the lease released and the job sent again after `retry_after` seconds (the
    service's Retry-After, bounded; None: the runner's own backoff). Checkpoints keep what is done."""

    def __init__(self, code: str, message: str, *, retry_after: float | None = None):
        super().__init__(code, message)
        self.retry_after = retry_after


class LeaseLost(JobError):
    """Another delivery owns the job now: stop at once and write nothing more anywhere."""

    def __init__(self, where: str):
        super().__init__("LEASE_LOST", f"lease lost at {where}")
        self.where = where


class OutOfTime(JobError):
    """The delivery's time budget cannot fit the next phase: the job is handed back (lease released, a fresh
    message sent) and the next delivery resumes from the last checkpoint with a whole budget."""

    def __init__(self, before: str):
        super().__init__("OUT_OF_TIME", f"delivery budget spent before {before}")


class WorkerStopping(JobError):
    """The worker is stopping (SIGTERM) and the delivery is between two phases: the job is handed back (lease
    released, its attempt given back, a fresh message sent) and another worker resumes it from the checkpoint
    just written, instead of this process starting a phase it may not finish."""

    def __init__(self, where: str):
        super().__init__("WORKER_STOPPING", f"worker stopping ({where})")


class NotAwaitingReauth(DomainError):
    status, code, title = 409, "job_not_awaiting_reauth", "Job is not awaiting re-authentication"


class NotRequester(DomainError):
    status, code, title = 403, "not_job_requester", "Only the user who started the job may re-authorise it"


class DeliveryNotStarted(Exception):
    """The database failed a delivery before its claim, even on a fresh connection: nothing of the job ran,
    so its message is made visible again at once (jobs/tasks.py) rather than after the visibility timeout."""
