"""The consumer-readiness gate: enqueue only where a live consumer and DRS exist (SPEC §4.1).

The SSM parameter must be exactly `true` (case-sensitive); missing, unreadable or anything else means
not ready. The answer is cached per process for READINESS_CACHE_SECONDS, errors included, so an SSM
outage costs one slow call a minute, not one per request.
"""

import logging
import threading
import time

from django.conf import settings

from jobs.clients import ssm

log = logging.getLogger(__name__)

_lock = threading.Lock()
_cache: dict[str, tuple[float, bool]] = {}


def consumer_ready() -> bool:
    name = settings.READINESS_PARAMETER
    now = time.monotonic()
    with _lock:
        cached = _cache.get(name)
        if cached and now - cached[0] < settings.READINESS_CACHE_SECONDS:
            return cached[1]
    try:
        ready = ssm.get_parameter(name) == "true"
        reason = "value" if not ready else None
    except Exception as exc:  # boto errors, network: not ready, fail closed
        ready, reason = False, type(exc).__name__
    if not ready:
        log.info("market-jobs consumer not ready; prompt generation not enqueued", extra={"reason": reason})
    with _lock:
        _cache[name] = (now, ready)
    return ready


def readiness_set(value: str) -> None:
    """Write the readiness parameter (the local bootstrap; a deployment's infrastructure owns it)."""
    ssm.put_parameter(settings.READINESS_PARAMETER, value)
    reset_cache()


def reset_cache() -> None:
    with _lock:
        _cache.clear()
