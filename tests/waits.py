"""Waiting on observable state instead of for a fixed time: poll a condition until it holds or a deadline
passes, so a test is as fast as the machine allows and fails with a clear message when it does not happen."""

import time


def wait_until(predicate, timeout=30.0, what="condition"):
    """The first truthy value `predicate()` returns, polled every 0.1 s; AssertionError once `timeout` seconds
    have passed without one (an AssertionError the predicate raises ends the wait at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached in time")


def wait_terminal(job, timeout=30.0):
    """`job`, refreshed, once its status is no longer IN_PROGRESS."""

    def done():
        job.refresh_from_db()
        return job if job.status != "IN_PROGRESS" else None

    return wait_until(done, timeout, what=f"a terminal status of job {job.id}")
