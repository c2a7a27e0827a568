"""What a job handler raises to tell the runner how the attempt ended."""


class LeaseLost(Exception):
    """Another delivery owns the job now: stop at once and write nothing more anywhere."""


class RetryableJobError(Exception):
    """The attempt failed for a reason that may pass (timeouts, 429/5xx, DRS `retryable`)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class TerminalJobError(Exception):
    """The job cannot succeed as it stands: it ends FAILED with this code."""

    def __init__(self, code: str, message: str, *, needs_reauth: bool = False, retryable: bool = False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.needs_reauth = needs_reauth
        self.retryable = retryable
