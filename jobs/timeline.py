"""A job's timeline for the admin's waterfall: where its time went, from the request through the queue to each
delivery and its external calls.

Built from the job's traces when their spans are kept (TRACES_FILE: `make run`'s var/traces/spans.jsonl; the
traces are the ones its history names, JobEvent.trace_id), otherwise from the job's history alone (the events
every delivery writes: message sent, lease claimed, checkpoints, outcome). A deployment exporting to a
collector keeps no spans here: its operators open the trace id in the collector's UI, and the job page
draws the history's timeline.
"""

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from jobs.models import JobEvent

# What a segment is, for its colour and its label; the legend lists them in this order.
KINDS = {
    "request": "request",
    "queue": "queue wait",
    "delivery": "delivery",
    "drs": "DRS",
    "ims": "IMS exchange",
    "semrush": "Semrush",
    "publish": "publish",
}
# Our own spans around one step (serenity.tracing.span), and what each is.
_STEP_SPANS = {
    "drs.generate": ("drs", "DRS: generate prompts"),
    "ims.exchange": ("ims", "IMS: exchange token"),
    "semrush.write": ("semrush", "Semrush: write prompts"),
    "semrush.publish": ("publish", "publish"),
}
# A span as the span file holds it (serenity.tracing.span_document).
Span = dict[str, Any]
_SERVICES = {"ims": "IMS", "semrush": "Semrush", "drs": "DRS"}
_READ_LIMIT_BYTES = 64 * 1024 * 1024  # the span file's tail that is searched (a local run's file only grows)


@dataclass
class Segment:
    """One bar: `start` and `end` in seconds from the timeline's origin, `depth` its indent under its parent."""

    label: str
    kind: str
    start: float
    end: float
    depth: int = 0
    note: str = ""

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Timeline:
    source: str  # "spans", "history" or "none"
    segments: list[Segment] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return max((s.end for s in self.segments), default=0.0)


def job_timeline(job_id: uuid.UUID | str, events: list[JobEvent] | None = None) -> Timeline:
    """The job's timeline: from its kept spans when there are any, otherwise from its history."""
    if events is None:
        events = list(JobEvent.objects.filter(job_id=uuid.UUID(str(job_id))).order_by("at", "id"))
    trace_ids = list(dict.fromkeys(e.trace_id for e in events if e.trace_id))
    spans = read_spans(trace_ids) if trace_ids and settings.TRACES_FILE else []
    timeline = from_spans(spans) if spans else from_history(events)
    timeline.trace_ids = trace_ids
    return timeline


# --- from spans ---------------------------------------------------------------------------------------------


def read_spans(trace_ids: list[str], path: str | None = None) -> list[Span]:
    """The spans of these traces in the span file (serenity.tracing.JsonLinesExporter), in no order."""
    file = Path(path or settings.TRACES_FILE)
    wanted = set(trace_ids)
    try:
        with file.open("rb") as stream:
            size = stream.seek(0, 2)
            stream.seek(max(0, size - _READ_LIMIT_BYTES))
            lines = stream.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        # A cheap look before parsing: most lines belong to other traces.
        if any(t in line for t in wanted):
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # the first, partial line of the tail
            if doc.get("traceId") in wanted:
                found.append(doc)
    return found


def _service_of(span: Span, parents: dict[str, Span]) -> str | None:
    """Which outside service an HTTP call went to: from the step it happened in, else from its URL."""
    parent = parents.get(str(span.get("parentId")))
    while parent is not None:
        if parent["name"] in _STEP_SPANS:
            kind = _STEP_SPANS[str(parent["name"])][0]
            return "semrush" if kind == "publish" else kind
        parent = parents.get(str(parent.get("parentId")))
    url = _url(span)
    for kind in ("ims", "semrush", "drs"):
        if kind in url:
            return kind
    return None


def _url(span: Span) -> str:
    attributes = span.get("attributes") or {}
    return str(attributes.get("url.full") or attributes.get("http.url") or "")


def _path(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return "/" + rest.split("/", 1)[1] if "/" in rest else url


def _short_route(name: str) -> str:
    """`POST v2/orgs/<str:orgId>/brands/<str:brandId>/serenity/markets` -> `POST …/serenity/markets`."""
    method, _, route = name.partition(" ")
    parts = [p for p in route.split("/") if p and not p.startswith("<")]
    return f"{method} …/{'/'.join(parts[-2:])}" if route else name


def from_spans(spans: list[Span]) -> Timeline:
    """Segments for the entry point's request, the queue waits, each delivery, its steps and HTTP calls."""
    by_id = {s["spanId"]: s for s in spans}
    kept: dict[str, tuple[str, str, str]] = {}  # span id -> (kind, label, note)
    queries: dict[str, int] = {}
    deliveries = sorted(
        (s for s in spans if s["kind"] == "CONSUMER" and s["name"].startswith("run/")), key=lambda s: s["start"]
    )
    for number, s in enumerate(deliveries, 1):
        attributes = s.get("attributes") or {}
        kept[s["spanId"]] = (
            "delivery",
            f"delivery {attributes.get('job.attempt', number)}",
            str(attributes.get("job.outcome", "")),
        )
    for s in spans:
        attributes = s.get("attributes") or {}
        if s["kind"] == "SERVER" and s.get("parentId") not in by_id:
            kept[s["spanId"]] = (
                "request",
                f"request {_short_route(s['name'])}",
                str(attributes.get("http.response.status_code") or attributes.get("http.status_code") or ""),
            )
        elif s["name"] in _STEP_SPANS:
            kind, label = _STEP_SPANS[s["name"]]
            kept[s["spanId"]] = (kind, label, "failed" if s.get("status") == "ERROR" else "")
        elif s["kind"] == "CLIENT" and _url(s):
            service = _service_of(s, by_id)
            if service is not None:
                status = attributes.get("http.response.status_code") or attributes.get("http.status_code") or ""
                method = attributes.get("http.request.method") or attributes.get("http.method") or s["name"]
                kept[s["spanId"]] = (service, f"{_SERVICES[service]} {method} {_path(_url(s))}", str(status))
        elif "db.system" in attributes or "db.system.name" in attributes:
            owner = _nearest(s, kept, by_id)
            if owner is not None:
                queries[owner] = queries.get(owner, 0) + 1
    if not kept:
        return Timeline(source="none")
    origin = min(by_id[i]["start"] for i in kept)
    segments: list[tuple[int, Segment]] = []
    for span_id, (kind, label, note) in kept.items():
        s = by_id[span_id]
        depth, parent = 0, _nearest(s, kept, by_id)
        while parent is not None:
            depth += 1
            parent = _nearest(by_id[parent], kept, by_id)
        if span_id in queries:
            note = f"{note}, {queries[span_id]} SQL" if note else f"{queries[span_id]} SQL"
        segments.append(
            (
                s["start"],
                Segment(
                    label=label,
                    kind=kind,
                    start=(s["start"] - origin) / 1e9,
                    end=(s["end"] - origin) / 1e9,
                    depth=depth,
                    note=note,
                ),
            )
        )
    # The time each message waited: from its send (the Celery producer span, a child of the request or of the
    # delivery that retried) to the delivery that received it.
    for delivery in deliveries:
        sent = by_id.get(delivery.get("parentId"))
        if sent is not None and sent["kind"] == "PRODUCER":
            segments.append(
                (
                    sent["end"],
                    Segment(
                        label="queue wait",
                        kind="queue",
                        start=(sent["end"] - origin) / 1e9,
                        end=(delivery["start"] - origin) / 1e9,
                    ),
                )
            )
    return Timeline(source="spans", segments=[seg for _, seg in sorted(segments, key=lambda p: p[0])])


def _nearest(span: Span, kept: dict[str, tuple[str, str, str]], by_id: dict[str, Span]) -> str | None:
    """The closest ancestor of `span` that is drawn, or None."""
    parent = by_id.get(str(span.get("parentId")))
    while parent is not None:
        if parent["spanId"] in kept:
            return str(parent["spanId"])
        parent = by_id.get(str(parent.get("parentId")))
    return None


# --- from the history ---------------------------------------------------------------------------------------

# Checkpoint phases (markets/constants.py) that end a step, and the step they end.
_PHASE_STEPS = {
    "generated": ("drs", "DRS: generate prompts"),
    "writing": ("ims", "IMS exchange, Semrush project"),
    "written": ("semrush", "Semrush: write prompts"),
    "published": ("publish", "publish"),
}
_DELIVERY_ENDS = {"completed", "failed", "retry_scheduled", "lease_released", "lease_lost", "requeued", "marked_failed"}


def from_history(events: list[JobEvent]) -> Timeline:
    """Segments from the events alone: the request's enqueue (created -> message sent), each queue wait
    (message sent -> lease claimed), each delivery (lease claimed -> its outcome) with the steps its
    checkpoints mark."""
    if not events:
        return Timeline(source="none")
    origin = events[0].at

    def at(e: JobEvent) -> float:
        return (e.at - origin).total_seconds()

    segments: list[Segment] = []
    request_start: datetime | None = None
    sent: JobEvent | None = None
    delivery: Segment | None = None
    step_start = 0.0
    number = 0
    for e in events:
        if e.kind in ("created", "replaced", "reauthorized", "rerun"):
            request_start = e.at
        elif e.kind == "message_sent":
            if request_start is not None:
                segments.append(
                    Segment(
                        label="request (enqueue)",
                        kind="request",
                        start=(request_start - origin).total_seconds(),
                        end=at(e),
                    )
                )
                request_start = None
            sent = e
        elif e.kind == "lease_claimed":
            if sent is not None:
                segments.append(Segment(label="queue wait", kind="queue", start=at(sent), end=at(e)))
                sent = None
            number += 1
            delivery = Segment(label=f"delivery {number}", kind="delivery", start=at(e), end=at(e))
            segments.append(delivery)
            step_start = at(e)
        elif e.kind == "checkpoint" and delivery is not None:
            if e.detail in _PHASE_STEPS:
                kind, label = _PHASE_STEPS[e.detail]
                segments.append(Segment(label=label, kind=kind, start=step_start, end=at(e), depth=1))
            step_start = at(e)
            delivery.end = at(e)
        elif e.kind in _DELIVERY_ENDS and delivery is not None:
            delivery.end = at(e)
            delivery.note = e.kind if e.kind != "failed" else (e.detail.split(":", 1)[0] or "failed")
            delivery = None
    return Timeline(source="history", segments=segments)
