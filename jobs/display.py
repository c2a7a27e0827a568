"""Token-free presentation of jobs for the admin and the runbook commands: redaction, summaries, ages.

A job's parameters must never carry a token, but what an operator sees stays token-free even if one ever
did: secret-named keys are masked and token-shaped strings replaced, at any depth.
"""

import json
import re
from datetime import datetime
from typing import Any

from django.utils import timezone

from jobs.selectors import Deliveries
from serenity.logging import REDACTED, redact

# Keys whose values are never shown, whatever they hold.
_SECRET_KEY = re.compile(r"(?i)token|secret|password|authorization|bearer|credential|cookie|api[-_]?key")


def redacted(value: object) -> object:
    """`value` with secret-named keys masked and token-shaped strings replaced, at any depth."""
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET_KEY.search(str(k)) else redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value


def params_for_display(params: object) -> str:
    """The job's parameters as indented JSON, redacted."""
    return json.dumps(redacted(params or {}), indent=2, sort_keys=True, default=str)


def checkpoints_summary(checkpoints: dict[str, Any] | None) -> dict[str, object]:
    """Checkpoints with bulky values summarised: a persisted batch shows as its prompt count, other
    lists and objects as their size; scalars as they are (redacted)."""
    out: dict[str, object] = {}
    for key, value in (checkpoints or {}).items():
        if _SECRET_KEY.search(str(key)):
            out[key] = REDACTED
        elif isinstance(value, dict) and isinstance(value.get("prompts"), list):
            out[key] = f"{len(value['prompts'])} prompts"
        elif isinstance(value, list):
            out[key] = f"{len(value)} items"
        elif isinstance(value, dict):
            out[key] = f"{len(value)} keys"
        else:
            out[key] = redacted(value)
    return out


def checkpoints_line(checkpoints: dict[str, Any] | None) -> str:
    summary = checkpoints_summary(checkpoints)
    return ", ".join(f"{k}={v}" for k, v in summary.items()) or "none"


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """`42m ago` style age of a datetime, for one-line reports."""
    if moment is None:
        return "never"
    seconds = int(((now or timezone.now()) - moment).total_seconds())
    if seconds < 0:
        return f"in {_span(-seconds)}"
    return f"{_span(seconds)} ago"


def _span(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def deliveries_line(d: Deliveries, *, in_progress: bool) -> str:
    """How a job's deliveries went (`selectors.deliveries`), in the words of the job page and `job_inspect`:
    `attempts 2 of 5, lost deliveries 1`, then what an operator must know before re-sending it."""
    line = f"attempts {d.attempts} of {d.max_attempts}, lost deliveries {d.lost}"
    if not in_progress:
        return line
    if d.parked:
        line += "; parked: no worker runs it until named with --job (job_requeue_stuck) or marked failed"
    elif d.crash_looping:
        line += "; a crash loop: its deliveries keep dying, no tool re-sends it unless named with --job"
    if d.attempts_spent:
        line += (
            "; its attempts are spent: a re-sent message ends it FAILED RETRIES_EXHAUSTED at once, after which "
            "job_rerun runs it again with a fresh budget"
        )
    return line


def resend_warning(job_id: object, d: Deliveries) -> str:
    """What a tool says before re-sending a job whose attempts are spent (it would end at once), or ""."""
    if not d.attempts_spent:
        return ""
    return (
        f"its attempts are spent ({d.attempts} of {d.max_attempts}): re-sent, it ends FAILED RETRIES_EXHAUSTED as "
        f"soon as a worker receives it, its credential kept; then `job_rerun --job {job_id} --apply` runs it again "
        "with a fresh budget"
    )


def duration(seconds: float) -> str:
    """A length of time to the nearest second, in its two largest units: `45s`, `15m 30s`, `2h`, `3d 4h`."""
    rest = max(0, round(seconds))
    for i, (unit, size) in enumerate(_UNITS):
        if rest >= size or unit == "s":
            major, rest = divmod(rest, size)
            text = f"{major}{unit}"
            if unit != "s":
                minor_unit, minor_size = _UNITS[i + 1]
                if rest // minor_size:
                    text += f" {rest // minor_size}{minor_unit}"
            return text
    raise AssertionError("unreachable: the last unit is the second")


_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def stamp(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else "-"
