"""The waiting poll (`GET …/jobs/{jobId}?wait=N` with If-None-Match): answer when the job's answer changes, or
after N seconds with what was last read. The view looks the job up (scoped, rendered, its ETag) through `look`;
this module decides whether to wait, and how, holding no database connection while it sleeps.

A request waits only with `?wait=N`, an ETag to compare and room for one more waiter in this process
(POLL_WAIT_MAX_WAITERS), and never in a stopping process. It is woken by the job's NOTIFY at its commit
(jobs/job_changes.py, from the trigger of jobs/migrations/0007_job_change_notify.py), or re-reads every
POLL_WAIT_INTERVAL_SECONDS while nothing can wake it (the listener not listening yet, SQLite).
"""

import hashlib
import time
from collections.abc import Callable

from django.conf import settings

from jobs.job_changes import listener
from serenity import stopping
from serenity.db import release_connection

# One look at the job: the answer's bytes, its headers (its ETag among them) and the job's status.
Look = Callable[[], tuple[bytes, dict[str, str], str]]


def etag_for(content: bytes) -> str:
    """A strong validator over the exact bytes served: any visible change (status, updatedAt, a public
    message) changes it, and nothing invisible does."""
    return '"' + hashlib.sha256(content).hexdigest()[:32] + '"'


def if_none_match(header: str | None, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison against a list of entity tags, or `*`."""
    if not header:
        return False
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or etag in {tag.removeprefix("W/") for tag in tags}


def look_or_wait(job_id, look: Look, *, known: str | None, wait: int) -> tuple[bytes, dict[str, str]]:
    """The answer to a poll: one look at once, or, for a waiting poll that may wait (see above), the last look
    of `wait_for_change`."""
    if not wait or not known or stopping.is_stopping() or listener.waiters() >= settings.POLL_WAIT_MAX_WAITERS:
        content, headers, _status = look()
        return content, headers
    return wait_for_change(job_id, look, known=known, wait=wait)


def wait_for_change(job_id, look: Look, *, known: str, wait: int) -> tuple[bytes, dict[str, str]]:
    """Look at the job until its answer differs from the ETag `known` or `wait` seconds pass; the last look.

    A change of status answers at once. A change of progress alone (a phase, an attempt, `updatedAt`) answers
    POLL_WAIT_SETTLE_SECONDS after it, or at once when the status changes meanwhile: a job's last phases come
    within a second of its end, and a waiting UI then learns of them in the one answer that carries the end,
    not one request each. Between looks the request sleeps holding no database connection, woken by the job's
    NOTIFY (jobs/job_changes.py), or re-reads every POLL_WAIT_INTERVAL_SECONDS while nothing can wake it.
    """
    # Watch before the first look, so a change committed after it is never missed.
    with listener.watch(job_id) as watch:
        now = time.monotonic()
        deadline, settled_at = now + wait, None
        content, headers, status = look()
        started = status
        if not if_none_match(known, headers["ETag"]):
            return content, headers  # the caller is behind: the answer at once
        while now < deadline and not stopping.is_stopping():  # a stopping process answers what it last read
            if not if_none_match(known, headers["ETag"]):
                if status != started or (settled_at is not None and now >= settled_at):
                    break
                if settled_at is None:
                    settled_at = now + settings.POLL_WAIT_SETTLE_SECONDS
            release_connection()  # a waiting request holds no connection
            until = min(deadline, settled_at) if settled_at is not None else deadline
            if not listener.listening.is_set():
                until = min(until, now + settings.POLL_WAIT_INTERVAL_SECONDS)
            watch.wait(max(0.0, until - now))
            content, headers, status = look()
            now = time.monotonic()
    return content, headers
