"""Geometry of the admin's two charts, drawn server-side as SVG by templates (no script: the admin's
Content-Security-Policy runs only the service's own files): a job's waterfall (jobs/admin/timeline.py) and the
overview's outcomes per hour. Everything here is numbers and labels; the templates only place them."""

from dataclasses import dataclass
from typing import Any

from jobs.admin.timeline import KINDS, WAITS, Timeline
from jobs.display import duration

COLOURS = {
    "request": "#4e79a7",
    "queue": "#bab0ac",
    "backoff": "#d4a6c8",
    "held": "#9c755f",
    "throttled": "#c9a86a",
    "parked": "#7f3c8d",
    "reauth": "#ff9da7",
    "idle": "#e0e0e0",
    "delivery": "#59a14f",
    "died": "#b00020",
    "drs": "#f28e2b",
    "ims": "#b07aa1",
    "semrush": "#76b7b2",
    "publish": "#edc948",
}
BARS_X = 4.5  # the outcome charts' plot starts here (percent of their width): left of it, the counts' scale
OUTCOME_COLOURS = {"completed": "#59a14f", "failed": "#e15759", "needs_reauth": "#f28e2b", "cancelled": "#bab0ac"}


def seconds(value: float) -> str:
    """`350 ms`, `12.40 s`, `15m 30s`: a duration as the waterfall writes it."""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s" if value < 60 else duration(value)


# The waterfall's layout, in percent of its width: the labels' column, then the plot. It takes the width of its
# container, and every text is fitted to the narrowest it is drawn at (an 800-px window: the admin's content is
# then about MIN_WIDTH_PX wide), with the whole of it in the row's tooltip.
PLOT_X, PLOT_W = 30.0, 69.0
MIN_WIDTH_PX = 400  # 426 measured in Chromium at 800 px (650 at 1024), the admin's navigation open; a little to spare
# From a 1400-px window on (jobs/static/jobs/admin.css switches), labels are drawn fitted to this width instead.
WIDE_WIDTH_PX = 940  # 986 measured at 1400 px
ROW_HEIGHT, TOP = 22, 30
# A stretch where nothing runs (waits, a dead worker's lease running out) longer than everything that ran put
# together, and than MIN_BREAK_SECONDS, is drawn shortened: GAP_WIDTH of the plot, GAPS_WIDTH at most for all.
MIN_BREAK_SECONDS = 2.0
GAP_WIDTH, GAPS_WIDTH = 0.07, 0.3
MIN_BAR = 0.3  # percent of the plot: a bar of a millisecond is still seen
# And at least this many pixels at the narrowest width, its duration written beside it: a 16-s dead delivery next to
# a long request is a bar, not a sliver.
MIN_BAR_PX = 6


@dataclass(frozen=True)
class Row:
    """One segment's row: its label left of the plot, its bar, and its duration (and note) where they fit."""

    label: str
    label_text: str  # `label`, fitted to the labels' column at MIN_WIDTH_PX
    label_wide: str  # and at WIDE_WIDTH_PX
    kind: str
    note: str
    duration: str
    title: str  # the tooltip: everything, whatever was cut to fit
    y: float
    indent: float
    x: float  # the bar, in percent of the plot
    width: float
    colour: str
    text: str  # duration · note, fitted to where it is written
    text_x: float  # percent of the plot
    text_dx: int  # px from text_x
    text_anchor: str
    text_fill: str

    @property
    def text_y(self) -> float:
        return self.y + ROW_HEIGHT - 7


@dataclass(frozen=True)
class Piece:
    """A stretch of the time axis drawn linearly: seconds [t0, t1] at [x0, x1] (fractions of the plot)."""

    t0: float
    t1: float
    x0: float
    x1: float
    shortened: bool

    def x(self, t: float) -> float:
        if self.t1 <= self.t0:
            return self.x0
        return self.x0 + (t - self.t0) / (self.t1 - self.t0) * (self.x1 - self.x0)


def axis(timeline: Timeline) -> list[Piece]:
    """The time axis in pieces: linear where something runs, each long stretch where nothing does shortened to a
    fixed width (a broken axis), so one long wait cannot flatten everything else into slivers."""
    total = timeline.total or 0.001
    busy = sorted(
        (s.start, s.end) for s in timeline.segments if s.kind not in WAITS and s.kind != "died" and s.end > s.start
    )
    merged: list[list[float]] = []
    for start, end in busy:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    worked = sum(end - start for start, end in merged)
    edges = [0.0, *(t for pair in merged for t in pair), total]
    idle = [(edges[i], edges[i + 1]) for i in range(0, len(edges) - 1, 2)]
    long = [(a, b) for a, b in idle if b - a > max(MIN_BREAK_SECONDS, worked)]
    linear = total - sum(b - a for a, b in long)
    if not long or worked <= 0 or linear <= 0:
        return [Piece(0.0, total, 0.0, 1.0, False)]
    gap = min(GAP_WIDTH, GAPS_WIDTH / len(long))
    scale = (1.0 - gap * len(long)) / linear
    pieces, t, x = [], 0.0, 0.0
    for a, b in long:
        if a > t:
            pieces.append(Piece(t, a, x, x + (a - t) * scale, False))
            x += (a - t) * scale
        pieces.append(Piece(a, b, x, x + gap, True))
        t, x = b, x + gap
    if total > t:
        pieces.append(Piece(t, total, x, 1.0, False))
    return pieces


def _at(pieces: list[Piece], t: float) -> float:
    for piece in pieces:
        if t <= piece.t1:
            return piece.x(t)
    return 1.0


# Upper bounds of how wide an 11-px sans-serif character is drawn (DejaVu Sans, Helvetica, Arial measured),
# by its class: what `fit` counts with, so a fitted text is never wider than its room.
_NARROW, _CAPITALS = frozenset(" .,:;'!|()[]/-ilIjft"), 7.8


def text_px(text: str) -> float:
    """How wide `text` is drawn at most, in pixels, at 11 px."""
    return sum(
        4.2 if c in _NARROW else _CAPITALS if c.isupper() or c in "…@%&mwMW_" else 7.0 if c.isdigit() else 6.4
        for c in text
    )


def fit(text: str, px: float) -> str:
    """`text` cut to what `px` pixels hold (`text_px`), ending in an ellipsis when cut; "" when nothing fits."""
    if text_px(text) <= px:
        return text
    while text and text_px(text + "…") > px:
        text = text[:-1]
    return text.rstrip() + "…" if text.strip() else ""


def _ink(colour: str) -> str:
    """Dark or white text, whichever reads on a bar of `colour`."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#222222" if 0.299 * red + 0.587 * green + 0.114 * blue > 150 else "#ffffff"


def waterfall(timeline: Timeline) -> dict[str, Any]:
    """Rows (a bar each, on a shared time axis that breaks across long idle stretches), ticks and breaks for
    `timeline`, in percent of the plot's width, so the chart takes the width of its container."""
    pieces = axis(timeline)
    plot_px = MIN_WIDTH_PX * PLOT_W / 100
    rows = []
    for i, s in enumerate(timeline.segments):
        x0, x1 = _at(pieces, s.start), _at(pieces, s.end)
        width = max(MIN_BAR / 100, MIN_BAR_PX / plot_px, x1 - x0)
        x0 = max(0.0, min(x0, 1.0 - width))
        text = f"{seconds(s.duration)} · {s.note}" if s.note else seconds(s.duration)
        if all(p < text_px(seconds(s.duration)) for p in _places(x0, width, plot_px)):
            text = seconds(s.duration)  # the duration at least, wherever it fits
        # After the bar, before it, or inside it: wherever the most of it fits at the narrowest width.
        places = [
            ((1.0 - x0 - width) * plot_px - 8, (x0 + width) * 100, 4, "start", "#666666"),
            (x0 * plot_px - 8, x0 * 100, -4, "end", "#666666"),
            (width * plot_px - 10, x0 * 100, 4, "start", _ink(COLOURS.get(s.kind, "#999999"))),
        ]
        room, text_x, dx, anchor, fill = next((p for p in places if p[0] >= text_px(text)), max(places))
        indent = 6 + 12 * s.depth
        title = (
            f"{s.label}: {seconds(s.duration)}" + (f" ({s.note})" if s.note else "") + (f". {s.tip}" if s.tip else "")
        )
        rows.append(
            Row(
                label=s.label,
                label_text=fit(s.label, MIN_WIDTH_PX * PLOT_X / 100 - indent - 10),
                label_wide=fit(s.label, WIDE_WIDTH_PX * PLOT_X / 100 - indent - 10),
                kind=s.kind,
                note=s.note,
                duration=seconds(s.duration),
                title=title,
                y=TOP + i * ROW_HEIGHT,
                indent=indent,
                x=round(x0 * 100, 2),
                width=round(width * 100, 2),
                colour=COLOURS.get(s.kind, "#999999"),
                text=fit(text, room),
                text_x=round(text_x, 2),
                text_dx=dx,
                text_anchor=anchor,
                text_fill=fill,
            )
        )
    height = TOP + len(rows) * ROW_HEIGHT + 8
    return {
        "height": height,
        "rows": rows,
        "ticks": _ticks(pieces, plot_px),
        "breaks": [
            {
                "x": round(p.x0 * 100, 2),
                "width": round((p.x1 - p.x0) * 100, 2),
                "label": fit(f"+{seconds(p.t1 - p.t0)}", max(plot_px * (p.x1 - p.x0) + 40, 0)),
                "label_x": round((p.x0 + p.x1) / 2 * 100, 2),
                "anchor": _anchor((p.x0 + p.x1) / 2, plot_px, f"+{seconds(p.t1 - p.t0)}"),
                "title": f"{seconds(p.t1 - p.t0)} in which nothing ran, drawn shortened",
            }
            for p in pieces
            if p.shortened
        ],
        "plot_x": PLOT_X,
        "plot_w": PLOT_W,
        "axis_height": height - 14,
        "total": seconds(timeline.total),
        "legend": [{"kind": k, "label": v, "colour": COLOURS[k]} for k, v in KINDS.items()],
    }


def _places(x0: float, width: float, plot_px: float) -> list[float]:
    """The room, in pixels, after a bar, before it and inside it."""
    return [(1.0 - x0 - width) * plot_px - 8, x0 * plot_px - 8, width * plot_px - 10]


def _anchor(x: float, plot_px: float, text: str) -> str:
    """How a label centred at `x` (a fraction of the plot) is anchored so that it stays inside the plot."""
    half = text_px(text) / 2 / plot_px
    return "start" if x - half < 0 else "end" if x + half > 1 else "middle"


def _ticks(pieces: list[Piece], plot_px: float) -> list[dict[str, Any]]:
    """Time labels along the top: at the ends of each linear piece and evenly inside the long ones, never closer
    than a label's width to each other or to a break's label."""
    taken = [(p.x0 + p.x1) / 2 for p in pieces if p.shortened]
    wanted: list[tuple[float, float]] = []
    for p in pieces:
        if p.shortened:
            continue
        steps = max(1, int((p.x1 - p.x0) / 0.2))
        wanted += [(p.x0 + (p.x1 - p.x0) * k / steps, p.t0 + (p.t1 - p.t0) * k / steps) for k in range(steps + 1)]
    ticks: list[dict[str, Any]] = []
    labels: set[str] = set()
    spacing = 70 / plot_px
    for x, t in wanted:
        if any(abs(x - other) < spacing for other in taken):
            continue
        label = seconds(t)
        if label in labels:  # two ticks the same label names (`2m 4s` twice) say nothing: the first one stays
            continue
        labels.add(label)
        taken.append(x)
        if x <= 0.001:
            anchor = "start"
        elif x >= 0.999:
            anchor = "end"
        else:
            anchor = _anchor(x, plot_px, label)
        ticks.append({"x": round(x * 100, 2), "label": label, "anchor": anchor})
    return ticks


@dataclass(frozen=True)
class Block:
    """One outcome's part of one hour's bar, with the filtered job list it links to."""

    hour: str
    outcome: str
    count: int
    x: float
    y: float
    width: float
    height: float
    colour: str
    href: str


def hourly_bars(hours: list[tuple[str, dict[str, tuple[int, str]]]], *, height: int = 160) -> dict[str, Any]:
    """Stacked bars, one per hour, from `hours`: `[(label, {outcome: (count, href)})]` oldest first. Across, in
    percent of the plot (which spans BARS_X to the right edge), so the chart takes its container's width."""
    bottom = 20
    plot_h = height - bottom - 10
    peak = max((sum(c for c, _ in counts.values()) for _, counts in hours), default=0) or 1
    slot = 100 / max(1, len(hours))
    blocks, labels = [], []
    for i, (label, counts) in enumerate(hours):
        base = float(height - bottom)
        for outcome in OUTCOME_COLOURS:
            count, href = counts.get(outcome, (0, ""))
            if not count:
                continue
            h = plot_h * count / peak
            base -= h
            blocks.append(
                Block(
                    hour=label,
                    outcome=outcome,
                    count=count,
                    x=round(i * slot + slot * 0.1, 3),
                    y=round(base, 1),
                    width=round(slot * 0.8, 3),
                    height=round(h, 1),
                    colour=OUTCOME_COLOURS[outcome],
                    href=href,
                )
            )
        if len(hours) <= 24 or i % 24 == 0:
            x = i * slot + slot / 2
            labels.append(
                {
                    "x": round(x, 3),
                    "text": label[-5:-3] if len(hours) <= 24 else label[:10],
                    "anchor": "start" if len(hours) > 24 and i == 0 else "middle",
                }
            )
    return {
        "height": height,
        "blocks": blocks,
        "labels": labels,
        "peak": peak,
        "axis_y": height - bottom,
        "plot_x": BARS_X,
        "plot_w": 100 - BARS_X - 0.5,
        "legend": [{"outcome": k, "label": k.replace("_", " "), "colour": v} for k, v in OUTCOME_COLOURS.items()],
    }
