"""The waiting poll (`GET …/jobs/{jobId}?wait=N` with If-None-Match): answer when the job's answer changes, or
after N seconds with what was last read. The view looks the job up (scoped, rendered, its ETag) through `look`;
this module decides whether to wait, and how, holding no database connection while it sleeps.

A request waits only with `?wait=N`, an ETag to compare and room for one more waiter in this process
(POLL_WAIT_MAX_WAITERS) and for its caller's share of them: a user holds at most POLL_WAIT_MAX_WAITERS_PER_USER
waits of a process at once and an organization at most POLL_WAIT_MAX_WAITERS_PER_ORG, so no caller can take
the slots another tenant's waits need; a wait beyond its share answers at once as a plain poll, like one beyond
the process's. And never in a stopping process. It is woken by the job's NOTIFY at its commit
(jobs/job_changes.py, from the trigger of jobs/migrations/0007_job_change_notify.py), or re-reads every
POLL_WAIT_INTERVAL_SECONDS while nothing can wake it (the listener not listening yet, SQLite).
"""

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

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


class CallerShares:
    """How many waits of this process each user and each organization holds, each bounded by its setting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Counter[tuple[str, str]] = Counter()

    def held(self, kind: str, name: str) -> int:
        with self._lock:
            return self._held[(kind, name)]

    def full(self, *, user_id: str, org_id: str) -> bool:
        """Whether the user or the organization holds its whole share now (`share` decides, this only spares a
        caller at its share the watch a wait registers)."""
        with self._lock:
            return (
                self._held[("user", user_id)] >= settings.POLL_WAIT_MAX_WAITERS_PER_USER
                or self._held[("org", org_id)] >= settings.POLL_WAIT_MAX_WAITERS_PER_ORG
            )

    @contextmanager
    def share(self, *, user_id: str, org_id: str) -> Iterator[bool]:
        """Take one wait for the user and the organization if both have room: yields whether it was taken (and
        gives it back on leaving)."""
        keys = (("user", user_id), ("org", org_id))
        limits = (settings.POLL_WAIT_MAX_WAITERS_PER_USER, settings.POLL_WAIT_MAX_WAITERS_PER_ORG)
        with self._lock:
            taken = all(self._held[key] < limit for key, limit in zip(keys, limits, strict=True))
            if taken:
                self._held.update(keys)
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    self._held.subtract(keys)
                    for key in keys:
                        if self._held[key] <= 0:
                            del self._held[key]


shares = CallerShares()


def look_or_wait(
    job_id, look: Look, *, known: str | None, wait: int, user_id: str, org_id: str
) -> tuple[bytes, dict[str, str]]:
    """The answer to a poll: one look at once, or, for a waiting poll that may wait (see above), the last look
    of `wait_for_change`. `user_id` and `org_id` name the caller's shares (the organization the path names: a
    caller who may not see the job is answered 404 by the first look, before it takes a share)."""
    if (
        not wait
        or not known
        or stopping.is_stopping()
        or listener.waiters() >= settings.POLL_WAIT_MAX_WAITERS
        or shares.full(user_id=user_id, org_id=org_id)
    ):
        content, headers, _status = look()
        return content, headers
    return wait_for_change(job_id, look, known=known, wait=wait, user_id=user_id, org_id=org_id)


def wait_for_change(
    job_id, look: Look, *, known: str, wait: int, user_id: str = "", org_id: str = ""
) -> tuple[bytes, dict[str, str]]:
    """Look at the job until its answer differs from the ETag `known` or `wait` seconds pass; the last look.

    A change of status answers at once. A change of progress alone (a phase, an attempt, `updatedAt`) answers
    POLL_WAIT_SETTLE_SECONDS after it, or at once when the status changes meanwhile: a job's last phases come
    within a second of its end, and a waiting UI then learns of them in the one answer that carries the end,
    not one request each. Between looks the request sleeps holding no database connection, woken by the job's
    NOTIFY (jobs/job_changes.py), or re-reads every POLL_WAIT_INTERVAL_SECONDS while nothing can wake it. A
    caller whose user or organization holds its whole share of waits gets the first look at once.
    """
    # Watch before the first look, so a change committed after it is never missed.
    with listener.watch(job_id) as watch, ExitStack() as held:
        now = time.monotonic()
        deadline, settled_at = now + wait, None
        content, headers, status = look()  # a job the caller may not see raises (404) here, holding no share
        started = status
        if not if_none_match(known, headers["ETag"]):
            return content, headers  # the caller is behind: the answer at once
        if not held.enter_context(shares.share(user_id=user_id, org_id=org_id)):
            return content, headers  # beyond the caller's share: a plain poll
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
