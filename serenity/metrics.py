"""CloudWatch metrics as Embedded Metric Format (EMF) log lines: one JSON document per line on stdout.

Namespace `SpacecatSerenityMarketWorker`, dimension `Environment`; `JobsFailed` is also published per
`Environment` and `ErrorCode` (a bounded set). Reasons, free text and ids go to ordinary log lines, never to
a dimension (a dimension per id would cost a series each). The lines go to stdout, apart from the
ordinary log lines on stderr (serenity/logging.py).
"""

import logging
import time

from django.conf import settings

log = logging.getLogger("serenity.metrics")

MILLISECONDS = "Milliseconds"
COUNT = "Count"
SECONDS = "Seconds"


def emf_document(metrics: dict[str, tuple[float, str]], breakdown: dict[str, str] | None = None) -> dict:
    """One EMF document. Every metric is published per `Environment`; with `breakdown` (e.g. `{"ErrorCode":
    "NEEDS_REAUTH"}`) also per `Environment` and those dimensions, for the few metrics an alarm or a
    dashboard needs split (a bounded set of values, never an id or a free text)."""
    dimensions = [["Environment"]]
    if breakdown:
        dimensions.append(["Environment", *breakdown])
    doc = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": settings.METRICS_NAMESPACE,
                    "Dimensions": dimensions,
                    "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in metrics.items()],
                }
            ],
        },
        "Environment": settings.ENVIRONMENT,
        **(breakdown or {}),
    }
    doc.update({name: value for name, (value, _) in metrics.items()})
    return doc


def emit(breakdown: dict[str, str] | None = None, **metrics: tuple[float, str]) -> dict:
    """Emit one EMF line with the given metrics: `emit(DRSInvokeDurationMs=(12.5, MILLISECONDS))`."""
    doc = emf_document(metrics, breakdown)
    log.info("metrics", extra={"emf": doc})
    return doc
