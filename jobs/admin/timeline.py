"""A job's timeline for the admin's waterfall: where its time went, from the request through the queue to each
delivery and its external calls, and every wait between them with its cause.

Every delivery is on it, a delivery whose worker died included. The deliveries and the waits come from the job's
history (JobEvent: every claim, checkpoint and outcome a delivery writes, every message sent), which is complete
whatever happened to the worker: a delivery that claimed the job and recorded no outcome died, and is drawn from
its claim to its lease's expiry (or the takeover, were it earlier), marked "worker died / lease expired". The
waits between deliveries are named by what the history says caused them: queued, retry backoff, held back for
fairness, waiting for re-authorisation.

Where a delivery's spans are kept (TRACES_FILE: `make run`'s var/traces/spans.jsonl; the traces are the ones its
history names, JobEvent.trace_id), that delivery and the request are drawn from their spans instead, with every
step and outside call under them. A killed worker never exports its spans, so its delivery comes from the history
either way. A deployment exporting to a collector keeps no spans here: its operators open the trace id in the
collector's UI, and the job page draws the history's timeline.
"""

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs.codes import NEEDS_REAUTH
from jobs.display import duration
from jobs.models import AsyncJob, JobEvent, JobStatus, LeaseState
from serenity.logging import redact

# What a segment is, for its colour and its label; the legend lists them in this order.
KINDS = {
    "request": "request",
    "queue": "queued",
    "backoff": "retry backoff",
    "held": "held back for fairness",
    "throttled": "throttled (back-pressure)",
    "parked": "parked (crash loop), until named",
    "reauth": "waiting for re-authorisation",
    "idle": "ended, until put back to work",
    "delivery": "delivery",
    "died": "worker died / lease expired",
    "drs": "DRS",
    "ims": "IMS exchange",
    "semrush": "Semrush",
    "publish": "publish",
}
# The kinds that are a wait between deliveries, not work.
WAITS = frozenset({"queue", "backoff", "held", "throttled", "parked", "reauth", "idle"})
DIED = "worker died / lease expired"
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
# A delivery's span holds its claim: a claim this close to a span's edges is still inside it.
_CLAIM_IN_SPAN_SECONDS = 0.01


@dataclass
class Segment:
    """One bar: `start` and `end` in seconds from the timeline's origin, `depth` its indent under its parent,
    `note` what is written beside it, `tip` the longer account its tooltip adds."""

    label: str
    kind: str
    start: float
    end: float
    depth: int = 0
    note: str = ""
    tip: str = ""

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Timeline:
    source: str  # "spans", "spans+history" (deliveries without spans drawn from the history), "history" or "none"
    segments: list[Segment] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return max((s.end for s in self.segments), default=0.0)


@dataclass
class _Item:
    """A top-level bar (a request, a wait or a delivery) and the bars under it, in epoch seconds until placed."""

    bar: Segment
    under: list[Segment] = field(default_factory=list)
    times: int = 1  # a wait drawn once for several in a row (held back again and again)


def job_timeline(job: AsyncJob, *, events: list[JobEvent] | None = None, now: datetime | None = None) -> Timeline:
    """The job's timeline at `now`: its deliveries and waits from its history, each delivery and request from its
    spans where they are kept."""
    now = now or timezone.now()
    if events is None:
        events = list(JobEvent.objects.filter(job_id=job.id).order_by("at", "id"))
    trace_ids = list(dict.fromkeys(e.trace_id for e in events if e.trace_id))
    history = _History(job, now).walk(events)
    spans = read_spans(trace_ids) if trace_ids and settings.TRACES_FILE else []
    drawn = _SpanView(spans) if spans else None
    if drawn is None or not drawn.items():
        return _placed("history" if history.items() else "none", history.items(), trace_ids)
    items = [*drawn.requests, *[r for r in history.requests if not drawn.covers(r.bar.start)], *history.waits]
    if not history.deliveries:  # no claim recorded: the spans' deliveries (and, without history waits, their waits)
        return _placed("spans", [*items, *drawn.deliveries, *([] if history.waits else drawn.waits)], trace_ids)
    from_history = 0
    for claimed, item in history.deliveries:
        span = drawn.delivery_at(claimed)
        if span is None:
            from_history += 1
            items.append(item)
        else:
            span.bar.label, span.bar.note = item.bar.label, span.bar.note or item.bar.note
            items.append(span)
    return _placed("spans+history" if from_history else "spans", items, trace_ids)


def _placed(source: str, items: list[_Item], trace_ids: list[str]) -> Timeline:
    """Items in the order they began, each followed by the bars under it, on one axis from the earliest start."""
    if not items:
        return Timeline(source="none", trace_ids=trace_ids)
    items = sorted(items, key=lambda i: (i.bar.start, i.bar.end))
    origin = items[0].bar.start
    segments = []
    for item in items:
        for s in (item.bar, *sorted(item.under, key=lambda u: u.start)):
            s.start, s.end = s.start - origin, s.end - origin
            segments.append(s)
    return Timeline(source=source, segments=segments, trace_ids=trace_ids)


# --- from the history ---------------------------------------------------------------------------------------

# Checkpoint phases (markets/generation/jobtype.py) that end a step, and the step they end.
_PHASE_STEPS = {
    "generated": ("drs", "DRS: generate prompts"),
    "writing": ("ims", "IMS exchange, Semrush project"),
    "written": ("semrush", "Semrush: write prompts"),
    "published": ("publish", "publish"),
}
# Every checkpoint phase a delivery records (markets/generation/jobtype.py): the only checkpoint details the chart
# repeats.
_PHASES = frozenset({"queued", "generating", *_PHASE_STEPS})
# What starts a request that puts the job (back) to work, and how its bar is labelled.
_REQUESTS = {
    "created": "request (enqueue)",
    "replaced": "regeneration (enqueue)",
    "reauthorized": "re-authorisation (enqueue)",
    "rerun": "re-run (enqueue)",
}
_DELAYED = re.compile(r"delayed (\d+)s")
_LEASE_UNTIL = re.compile(r"lease until (\S+)")
# A gap between bars shorter than this is the time between two events of one step, not a wait.
_UNEXPLAINED_GAP_SECONDS = 0.5


@dataclass
class _Delivery:
    number: int
    actor: str
    claimed: float
    lease_until: float
    item: _Item
    step_start: float
    last_sign: float
    last_step: str = ""


class _History:
    """One pass over a job's events (in the order they happened), keeping what is open: the request being made,
    the delivery running, the wait under way."""

    def __init__(self, job: AsyncJob, now: datetime):
        self.job = job
        self.now = now.timestamp()
        self.requests: list[_Item] = []
        self.waits: list[_Item] = []
        self.deliveries: list[tuple[float, _Item]] = []  # (claimed at, its bar)
        self._all: list[_Delivery] = []
        self._open: _Delivery | None = None
        self._request: tuple[float, str] | None = None  # (since, label)
        self._queued: tuple[float, str] | None = None  # an open "queued" wait: (since, note)
        self._retrying = False  # the delivery that just ended scheduled a retry: the next delayed send is its backoff
        self._throttling = False  # the delivery that just ended was throttled: the next delayed send is that wait
        self._ended: tuple[float, str, str] | None = None  # the job ended: (at, status, code)
        self._parked: tuple[float, str] | None = None  # a delivery parked the job: (at, why), until it is named

    def items(self) -> list[_Item]:
        return [*self.requests, *self.waits, *(item for _, item in self.deliveries)]

    def walk(self, events: list[JobEvent]) -> "_History":
        for e in events:
            self._event(e, e.at.timestamp())
        self._finish()
        return self

    # -- one event ----------------------------------------------------------------------------------------------
    def _event(self, e: JobEvent, t: float) -> None:
        # What an event says goes on the page: through the same redaction as the history table and the logs.
        kind, detail = e.kind, redact(e.detail)
        if self._parked is not None and kind in ("message_sent", "failed", "marked_failed", "completed"):
            self._unpark(t)
        if kind == "parked":
            self._park(t, detail)
        elif kind in _REQUESTS:
            self._put_back(t, kind)
            self._request = (t, _REQUESTS[kind])
        elif kind == "message_sent":
            self._end_request(t)
            self._sent(t, _delay(detail))
        elif kind == "send_failed":
            self._end_request(t)
            self._queue(t, "its message could not be sent: the sweeper re-sends it")
        elif kind == "enqueue_failed":
            self._end_request(t)
            self._end_queue(t)
            self._ended = (t, JobStatus.FAILED, "ENQUEUE_FAILED")
        elif kind == "lease_claimed":
            self._claimed(e, t)
        elif kind == "checkpoint":
            self._checkpoint(detail, t)
        elif kind == "completed":
            self._end_queue(t)
            self._close(t, "completed")
            self._ended = (t, JobStatus.COMPLETED, "")
        elif kind in ("failed", "marked_failed"):
            code = detail.split(":", 1)[0].strip() or "FAILED"
            self._end_queue(t)
            self._close(t, code if kind == "failed" else f"marked failed by {redact(e.actor) or 'an operator'}: {code}")
            self._ended = (t, JobStatus.FAILED, code)
        elif kind == "retry_scheduled":
            code = detail.split(":", 1)[0].strip()
            if not self._close(t, f"retry: {code}") and self._all:
                self._all[-1].item.bar.note = f"retry: {code}"
            self._retrying = True
        elif kind == "lease_released":
            self._released(detail, t)
        elif kind == "lease_lost":
            self._lost(e.actor, t)

    def _park(self, t: float, detail: str) -> None:
        """A delivery parked the job instead of running it: the delivery before it died (no outcome of its own),
        and from now on nothing runs the job until an operator names it."""
        if self._open is not None:
            until = min(self._open.lease_until, t)
            self._die(self._open, until, f"parked at {_clock(t)}" if until == t else "")
        self._end_queue(t)
        self._parked = (t, detail)

    def _unpark(self, t: float) -> None:
        since, why = self._parked or (t, "")
        self._parked = None
        self._wait("parked", KINDS["parked"], since, t, why)

    def _put_back(self, t: float, kind: str) -> None:
        """The job is put back to work: the time since it ended was a wait for that (a re-authorisation, ...)."""
        if self._ended is None:
            return
        since, status, code = self._ended
        if code == NEEDS_REAUTH:
            self._wait("reauth", KINDS["reauth"], since, t, f"ended {status} {code}")
        else:
            until = {"replaced": "regenerated", "reauthorized": "re-authorised", "rerun": "re-run"}.get(kind, kind)
            self._wait("idle", f"{status} {code}".strip() + f", until {until}", since, t)
        self._ended = None

    def _end_request(self, t: float) -> None:
        if self._request is not None:
            since, label = self._request
            self.requests.append(_Item(Segment(label, "request", since, t)))
            self._request = None

    def _sent(self, t: float, delay: int) -> None:
        if not delay:
            self._retrying = self._throttling = False
            self._queue(t, "")
            return
        # A delayed message: a retry's backoff, or a delivery the fairness rule held back (the runner sends it
        # again delayed JOB_FAIR_HOLD_SECONDS after a claim its organization's share refused; no event of its own).
        kind = "backoff" if self._retrying else "throttled" if self._throttling else "held"
        self._retrying = self._throttling = False
        self._end_queue(t)
        if kind == "held" and (held := self._held_just_before(t)) is not None:
            # Held back again as soon as it could be received: one bar for the whole stretch, counted.
            held.times += 1
            held.bar.end, held.bar.note = t + delay, f"held back {held.times} times"
        else:
            self._wait(kind, KINDS[kind], t, t + delay, f"sent delayed {delay}s")
        self._queued = (t + delay, "")

    def _held_just_before(self, t: float) -> _Item | None:
        """The held-back wait this one continues (the message it delayed was received, and held back again), with
        the moment in between folded into it; None when there is none."""
        waits = self.waits
        between = len(waits) > 1 and waits[-1].bar.kind == "queue" and waits[-2].bar.kind == "held"
        if between and waits[-1].bar.start <= waits[-2].bar.end:
            waits.pop()
        if waits and waits[-1].bar.kind == "held" and waits[-1].bar.end <= t:
            return waits[-1]
        return None

    def _queue(self, t: float, note: str) -> None:
        if self._queued is None:  # a second message while one waits: the job waits since the first
            self._queued = (t, note)

    def _end_queue(self, t: float) -> None:
        if self._queued is None:
            return
        since, note = self._queued
        self._queued = None
        if t > since:
            self._wait("queue", KINDS["queue"], since, t, note)
        elif self.waits and self.waits[-1].bar.end > t:
            self.waits[-1].bar.end = max(self.waits[-1].bar.start, t)  # received before its delay ran out (clocks)

    def _wait(self, kind: str, label: str, start: float, end: float, note: str = "") -> None:
        self.waits.append(_Item(Segment(label, kind, start, end, note=note)))

    def _claimed(self, e: JobEvent, t: float) -> None:
        if self._open is not None:  # the delivery before this one recorded no outcome: its worker died
            until = min(self._open.lease_until, t)
            self._die(self._open, until, f"taken over at {_clock(t)}" if until == t else "")
            self._wait_after_death(until, "its message came back after its dead worker's lease")
        self._end_queue(t)
        match = _LEASE_UNTIL.search(e.detail)
        lease_until = t + settings.JOB_LEASE_TTL_SECONDS
        if match:
            try:
                lease_until = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")).timestamp()
            except ValueError:
                pass
        number = len(self._all) + 1
        item = _Item(Segment(f"delivery {number}", "delivery", t, t))
        delivery = _Delivery(number, e.actor, t, lease_until, item, step_start=t, last_sign=t)
        self._all.append(delivery)
        self.deliveries.append((t, item))
        self._open = delivery

    def _checkpoint(self, phase: str, t: float) -> None:
        d = self._open
        if d is None:
            return
        if phase in _PHASE_STEPS:
            kind, label = _PHASE_STEPS[phase]
            d.item.under.append(Segment(label, kind, d.step_start, t, depth=1))
        d.step_start = d.last_sign = t
        d.last_step = phase if phase in _PHASES else ""
        d.item.bar.end = t

    def _close(self, t: float, note: str) -> bool:
        """The running delivery ended with an outcome; False when none was running."""
        d = self._open
        if d is None:
            return False
        d.item.bar.end, d.item.bar.note = t, note
        self._open = None
        return True

    def _released(self, detail: str, t: float) -> None:
        d = self._open
        if d is None:
            return
        if detail == "stale lease released":  # an operator cleared the lease its dead worker left
            until = min(d.lease_until, t)
            self._die(d, until, f"lease released by an operator at {_clock(t)}")
            self._wait_after_death(until, "lease expired; waiting for an operator or its message")
        elif detail.startswith("retry in"):
            self._close(t, "retry")
            self._retrying = True
        elif detail.startswith("throttled:"):
            self._close(t, detail)
            self._throttling = True
        else:
            self._close(t, f"handed back: {detail}" if detail else "lease released")

    def _lost(self, actor: str, t: float) -> None:
        """A delivery found its lease gone: it ran past its lease (it was alive, though another may have taken the
        job over since)."""
        d = self._open if self._open is not None and (not actor or self._open.actor == actor) else None
        if d is None:
            d = next((x for x in reversed(self._all) if x.actor == actor and x.item.bar.kind == "died"), None)
            if d is None:
                return
            d.item.bar.kind = "delivery"
        else:
            self._open = None
        d.item.bar.end, d.item.bar.note = t, "lease lost: it ran past its lease"
        d.item.bar.tip = ""

    def _wait_after_death(self, until: float, note: str) -> None:
        """After a dead delivery's lease ran out the job waits again; a message sent while it was dying (a
        re-send) waits from then on, not from its sending."""
        if self._queued is None:
            self._queued = (until, note)
        else:
            self._queued = (max(self._queued[0], until), self._queued[1] or note)

    def _die(self, d: _Delivery, until: float, how: str) -> None:
        bar = d.item.bar
        bar.kind, bar.end, bar.note = "died", max(bar.start, until), DIED
        last = f"last sign of life {_clock(d.last_sign)}" + (f" (checkpoint {d.last_step})" if d.last_step else "")
        bar.tip = (
            f"claimed {_clock(d.claimed)} by {redact(d.actor) or 'a worker'}; {last}; no outcome recorded: its worker "
            f"died, its lease ran to {_clock(until)}" + (f", {how}" if how else "")
        )
        if self._open is d:
            self._open = None

    # -- now ------------------------------------------------------------------------------------------------------
    def _finish(self) -> None:
        """What is still open at `now`: a delivery running (or dead with its lease expired), a wait under way; then
        every stretch of an IN_PROGRESS job's life that no event explains, drawn as a wait for a worker."""
        job, now, at = self.job, self.now, datetime.fromtimestamp(self.now, UTC)
        in_progress = job.status == JobStatus.IN_PROGRESS
        running = in_progress and job.lease_state(at) == LeaseState.HELD
        if self._request is not None:  # no message went out after it (yet)
            since, _ = self._request
            self._request = None
            if in_progress and job.message_sent_at is None:
                self._queue(since, "its message was never sent: the sweeper re-sends it")
        d = self._open
        if d is not None and running:
            quiet = now - job.updated_at.timestamp()
            d.item.bar.end = now
            d.item.bar.note = (
                f"running? no sign of life for {duration(quiet)}: its worker is presumed dead"
                if quiet > 3 * settings.JOB_HEARTBEAT_SECONDS
                else "running"
            )
            self._open = None
        elif d is not None:
            expires = job.lease_expires_at.timestamp() if in_progress and job.lease_expires_at else d.lease_until
            until = min(expires, now)
            self._die(d, until, "not taken over yet" if in_progress else "")
            if in_progress:
                self._wait_after_death(until, "its dead worker's lease expired: waiting for its message or an operator")
        if self._queued is not None and in_progress and not running:
            since, note = self._queued
            self._queued = None
            if now > since:
                self._wait("queue", KINDS["queue"], since, now, note or f"since {_clock(since)}")
        for wait in self.waits:
            if wait.bar.end > now:  # a retry or a hold-back whose delay is not over: drawn up to now
                wait.bar.note = f"{wait.bar.note}; receivable at {_clock(wait.bar.end)}"
                wait.bar.end = now
        if self._parked is not None:
            self._unpark(now)
        if self._ended is not None and job.status == JobStatus.FAILED and job.error_code == NEEDS_REAUTH:
            since = self._ended[0]
            if now > since:
                self._wait("reauth", KINDS["reauth"], since, now, f"for {duration(now - since)}")
        self._fill_gaps()

    def _fill_gaps(self) -> None:
        """A stretch between two bars that no event accounts for (a delivery that gave its lease back on an
        unexpected error: its message comes back after the visibility timeout, without a send of its own) is a
        wait for a worker."""
        bars = sorted((i.bar for i in self.items()), key=lambda b: b.start)
        reach = bars[0].end if bars else 0.0
        for bar in bars[1:]:
            if bar.start - reach >= _UNEXPLAINED_GAP_SECONDS:
                self._wait("queue", KINDS["queue"], reach, bar.start, "no message sent: its message came back")
            reach = max(reach, bar.end)


def _delay(detail: str) -> int:
    match = _DELAYED.search(detail or "")
    return int(match.group(1)) if match else 0


def _clock(t: float) -> str:
    return f"{datetime.fromtimestamp(t, UTC):%H:%M:%S} UTC"


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


class _SpanView:
    """The job's spans as items: each entry point's request and each delivery with every step and call under it,
    and the time each message waited from its send to the delivery that received it."""

    def __init__(self, spans: list[Span]):
        self.requests: list[_Item] = []
        self.deliveries: list[_Item] = []
        self.waits: list[_Item] = []
        self._used: set[int] = set()
        by_id = {s["spanId"]: s for s in spans}
        kept: dict[str, tuple[str, str, str]] = {}  # span id -> (kind, label, note)
        queries: dict[str, int] = {}
        runs = sorted(
            (s for s in spans if s["kind"] == "CONSUMER" and s["name"].startswith("run/")), key=lambda s: s["start"]
        )
        for number, s in enumerate(runs, 1):
            attributes = s.get("attributes") or {}
            kept[s["spanId"]] = (
                "delivery",
                f"delivery {attributes.get('job.attempt', number)}",
                str(attributes.get("job.outcome", "")),
            )
        for s in spans:
            attributes = s.get("attributes") or {}
            if s["kind"] == "SERVER" and s.get("parentId") not in by_id and not _simulator(s):
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
        # Each delivery is a bar of its own (a retry's delivery descends from the one before it, the first from the
        # request), and so is each request; every other span goes under the nearest of them above it.
        tops = {
            span_id: _Item(self._segment(by_id[span_id], label, kind, note, queries.get(span_id), 0))
            for span_id, (kind, label, note) in kept.items()
            if kind in ("delivery", "request") or _nearest(by_id[span_id], kept, by_id) is None
        }
        for span_id, (kind, label, note) in kept.items():
            if span_id in tops:
                continue
            depth, top = 1, _nearest(by_id[span_id], kept, by_id)
            while top is not None and top not in tops:
                depth, top = depth + 1, _nearest(by_id[top], kept, by_id)
            if top is not None:
                tops[top].under.append(self._segment(by_id[span_id], label, kind, note, queries.get(span_id), depth))
        for item in tops.values():
            (self.requests if item.bar.kind == "request" else self.deliveries).append(item)
        # The time each message waited: from its send (the Celery producer span, a child of the request or of the
        # delivery that retried) to the delivery that received it.
        for run in runs:
            sent = by_id.get(run.get("parentId"))
            if sent is not None and sent["kind"] == "PRODUCER":
                self.waits.append(_Item(Segment(KINDS["queue"], "queue", sent["end"] / 1e9, run["start"] / 1e9)))

    @staticmethod
    def _segment(span: Span, label: str, kind: str, note: str, queries: int | None, depth: int) -> Segment:
        if queries:
            note = f"{note}, {queries} SQL" if note else f"{queries} SQL"
        return Segment(label=label, kind=kind, start=span["start"] / 1e9, end=span["end"] / 1e9, depth=depth, note=note)

    def items(self) -> list[_Item]:
        return [*self.requests, *self.deliveries, *self.waits]

    def covers(self, t: float) -> bool:
        """True when a request drawn from spans was under way at `t` (the history's own bar for it is not needed)."""
        return any(_holds(r.bar, t) for r in self.requests)

    def delivery_at(self, claimed: float) -> "_Item | None":
        """The delivery whose span holds a claim made at `claimed`, once; None when its spans were not kept (a
        worker killed mid-delivery exports none)."""
        for i, item in enumerate(self.deliveries):
            if i not in self._used and _holds(item.bar, claimed):
                self._used.add(i)
                return item
        return None


def _simulator(span: Span) -> bool:
    """A local simulator's own request (`make run` serves them in the API's process): a call some delivery made,
    never an entry point, even when the delivery that made it (a killed one) exported no span of its own."""
    return str(span["name"]).partition(" ")[2].startswith("sandbox/")


def _holds(bar: Segment, t: float) -> bool:
    return bar.start - _CLAIM_IN_SPAN_SECONDS <= t <= bar.end + _CLAIM_IN_SPAN_SECONDS


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


def _nearest(span: Span, kept: dict[str, tuple[str, str, str]], by_id: dict[str, Span]) -> str | None:
    """The closest ancestor of `span` that is drawn, or None."""
    parent = by_id.get(str(span.get("parentId")))
    while parent is not None:
        if parent["spanId"] in kept:
            return str(parent["spanId"])
        parent = by_id.get(str(parent.get("parentId")))
    return None
