"""Error codes the job core itself sets, and the one public sentence each shows callers.

Imports nothing from `jobs`: the API, the admin and the runbooks all read codes from here (and each job
type's own codes from its app, e.g. markets/generation/jobtype.py).
"""

import re

UNKNOWN_JOB_TYPE = "UNKNOWN_JOB_TYPE"  # no handler registered for the job's stored type
ENQUEUE_FAILED = "ENQUEUE_FAILED"  # the job's first message could not be sent
RETRIES_EXHAUSTED = "RETRIES_EXHAUSTED"  # JOB_MAX_ATTEMPTS deliveries used up (a re-run may succeed)
THROTTLED_TOO_LONG = "THROTTLED_TOO_LONG"  # JOB_MAX_THROTTLES throttled re-sends used up (a re-run may succeed)
NEEDS_REAUTH = "NEEDS_REAUTH"  # the delegated credential is gone: only its requester can re-authorise
OPERATOR_FAILED = "OPERATOR_FAILED"  # ended by an operator (admin or job_mark_failed)

PUBLIC_MESSAGES = {
    UNKNOWN_JOB_TYPE: "This job cannot be processed.",
    ENQUEUE_FAILED: "The job could not be queued.",
    RETRIES_EXHAUSTED: "The job kept failing and was stopped.",
    THROTTLED_TOO_LONG: "The job waited too long for a busy service and was stopped.",
    NEEDS_REAUTH: "Authorisation has expired. Re-authorise to continue.",
    OPERATOR_FAILED: "The job was stopped by an operator.",
}

# The shape of every error code: what an operator may type when marking a job failed.
ERROR_CODE = re.compile(r"^[A-Z][A-Z0-9_]{2,63}$")
