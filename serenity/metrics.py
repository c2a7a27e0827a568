"""CloudWatch metrics as Embedded Metric Format (EMF) log lines: one JSON document per line on stdout.

Namespace `SpacecatSerenityMarketWorker`, one dimension: `Environment`. Reasons and ids go to ordinary
log lines, never to a dimension (a dimension per reason would page per reason and cost per series).
"""
import logging
import time

from django.conf import settings

log = logging.getLogger("serenity.metrics")

MILLISECONDS = "Milliseconds"
COUNT = "Count"


def emf_document(metrics: dict[str, tuple[float, str]]) -> dict:
    doc = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": settings.METRICS_NAMESPACE,
                    "Dimensions": [["Environment"]],
                    "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in metrics.items()],
                }
            ],
        },
        "Environment": settings.ENVIRONMENT,
    }
    doc.update({name: value for name, (value, _) in metrics.items()})
    return doc


def emit(**metrics: tuple[float, str]) -> dict:
    """Emit one EMF line with the given metrics: `emit(DRSInvokeDurationMs=(12.5, MILLISECONDS))`."""
    doc = emf_document(metrics)
    log.info("metrics", extra={"emf": doc})
    return doc
