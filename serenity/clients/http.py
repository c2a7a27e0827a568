"""Shared HTTP plumbing for the client modules: one error taxonomy, timeouts and bounded retries.

Clients raise exactly three kinds of failure and callers decide from the class, never from a message:
`TransientError` (timeout, network, 429, 5xx: safe to retry later), `ReauthRequired` (401/403: the
credential is no longer good) and `PermanentError` (any other 4xx, or a payload we cannot use). A 429 is
the `Throttled` kind of `TransientError`: the service is healthy and asks us to slow down (back-pressure,
with its `Retry-After` when it gave one), so a caller may wait rather than count it a failure.

A `TransientError` also says whether the other side may have acted on the request (`maybe_processed`):
false only when the request provably never reached it (the connection was refused or never opened, or it
answered 429). A call with a side effect elsewhere (an IMS mint or exchange) is retried in place only then.
"""

import logging
import random
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx
from django.conf import settings

from serenity.clients.guard import outside_transaction

log = logging.getLogger(__name__)


class ClientError(Exception):
    """Base of every client failure. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class TransientError(ClientError):
    """Timeouts, network errors, 429 and 5xx: the same call may succeed later.

    `maybe_processed` is False only when the request provably did not reach the service."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None, maybe_processed: bool = True
    ):
        super().__init__(message, status=status, retry_after=retry_after)
        self.maybe_processed = maybe_processed


class Throttled(TransientError):
    """429: the service refused the call to slow us down; it did not process it. `retry_after` is its
    `Retry-After` in seconds when it sent one."""

    def __init__(self, message: str, *, status: int | None = 429, retry_after: float | None = None):
        super().__init__(message, status=status, retry_after=retry_after, maybe_processed=False)


class PermanentError(ClientError):
    """Other 4xx or an unusable payload: retrying the same call will not help."""


class ReauthRequired(ClientError):
    """401/403: the credential used is not (or no longer) accepted."""


_clients: dict[tuple[str, float], httpx.Client] = {}
_clients_lock = threading.Lock()
KEEPALIVE_SECONDS = 1.0
# The longest `Retry-After` of a 429 that `request` sleeps through in place (see there).
THROTTLE_WAIT_IN_PLACE_SECONDS = 5.0


def pooled_client(base_url: str, *, timeout: float) -> httpx.Client:
    """The process's one client for `base_url`, shared by all its threads (an httpx client is thread-safe):
    its connections and TLS context are reused by every later call (a worker's jobs, a server's requests),
    where a client per call would cost a new connection and ~17 ms of CPU to build, and a client per thread
    would multiply both by hundreds of threads. Nothing per caller lives on it (credentials go on each
    request), so sharing it leaks nothing between callers. It keeps up to HTTP_MAX_CONNECTIONS connections,
    one per thread calling at once (a thread beyond that waits for one, within the call's timeout).

    An idle connection is dropped after KEEPALIVE_SECONDS, shorter than servers' own keep-alive (gunicorn's is
    2 s), so a request is not sent on a connection the server closed for being idle: a call with a side effect
    elsewhere (an IMS exchange) could not tell that failure from one the server acted on. A server that closes
    earlier (a restart) can still cut one; such a call is then treated as possibly processed."""
    key = (base_url, timeout)
    client = _clients.get(key)
    if client is None or client.is_closed:
        with _clients_lock:
            client = _clients.get(key)
            if client is None or client.is_closed:
                size = getattr(settings, "HTTP_MAX_CONNECTIONS", 100)
                client = _clients[key] = httpx.Client(
                    base_url=base_url,
                    timeout=timeout,
                    limits=httpx.Limits(
                        max_connections=size, max_keepalive_connections=size, keepalive_expiry=KEEPALIVE_SECONDS
                    ),
                )
    return client


def retry_after_seconds(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def raise_for_status(response: httpx.Response, what: str) -> None:
    """Raise the taxonomy error for a non-2xx response; return for 2xx."""
    status = response.status_code
    if status < 300:
        return
    if status in (401, 403):
        raise ReauthRequired(f"{what}: HTTP {status}", status=status)
    if status == 429:
        # A refusal to process: back-pressure, never a sign the work was done.
        raise Throttled(f"{what}: HTTP 429", retry_after=retry_after_seconds(response))
    if status >= 500:
        # A 5xx may come after the work was done (and its answer lost).
        raise TransientError(f"{what}: HTTP {status}", status=status, retry_after=retry_after_seconds(response))
    raise PermanentError(f"{what}: HTTP {status}", status=status)


# Failures that happen before a single byte of the request left: the service cannot have acted on it.
_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


def transport_error(exc: httpx.TransportError, what: str) -> TransientError:
    """The taxonomy error for an httpx transport failure (timeouts and network errors)."""
    kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "network error"
    return TransientError(f"{what}: {kind} ({type(exc).__name__})", maybe_processed=not isinstance(exc, _UNSENT))


def json_object(response: httpx.Response, what: str) -> dict:
    """The response body as a JSON object. Raises PermanentError for anything else."""
    try:
        body = response.json()
    except ValueError:
        raise PermanentError(f"{what}: response is not JSON", status=response.status_code) from None
    if not isinstance(body, dict):
        raise PermanentError(f"{what}: response is not an object", status=response.status_code)
    return body


class Sender(Protocol):
    """What `request` sends with: an httpx client, or a wrapper that adds headers or a deadline to it."""

    def request(self, *args: Any, **kwargs: Any) -> httpx.Response: ...


def request(
    client: Sender,
    method: str,
    url: str,
    *,
    what: str,
    deadline: float | None = None,
    max_attempts: int = 4,
    base_delay: float = 0.25,
    idempotent: bool = True,
    **kwargs,
) -> httpx.Response:
    """Send one request, retrying transient failures with jittered exponential backoff.

    Honours `Retry-After`, never sleeps past `deadline` (a `time.monotonic()` value) and gives up after
    `max_attempts`. A throttle (429) is waited out in place only while its `Retry-After` is at most
    THROTTLE_WAIT_IN_PLACE_SECONDS: a longer one is raised at once (`Throttled`), so the caller hands the
    wait to its queue instead of holding a thread (and a job's lease) asleep.
    A call that is not `idempotent` (it has a side effect elsewhere) is retried only when
    the failed attempt provably never reached the service. Returns the 2xx response; raises
    TransientError / PermanentError / ReauthRequired.
    """
    outside_transaction(what)
    attempt = 0
    while True:
        attempt += 1
        try:
            response = client.request(method, url, **kwargs)
            raise_for_status(response, what)
            return response
        except httpx.TransportError as exc:
            error = transport_error(exc, what)
        except TransientError as exc:
            error = exc
        if not idempotent and error.maybe_processed:
            raise error
        if isinstance(error, Throttled) and (error.retry_after or 0) > THROTTLE_WAIT_IN_PLACE_SECONDS:
            raise error
        delay = error.retry_after if error.retry_after is not None else base_delay * 2 ** (attempt - 1)
        delay = min(delay, 30.0) * (1 + random.random() * 0.1)
        if attempt >= max_attempts or (deadline is not None and time.monotonic() + delay >= deadline):
            raise error
        log.info("retrying after transient error", extra={"call": what, "attempt": attempt, "reason": str(error)})
        time.sleep(delay)
