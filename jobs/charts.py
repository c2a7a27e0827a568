"""Geometry of the admin's two charts, drawn server-side as SVG by templates (no script: the admin's
Content-Security-Policy runs only the service's own files): a job's waterfall (jobs/timeline.py) and the
overview's outcomes per hour. Everything here is numbers and labels; the templates only place them."""

from dataclasses import dataclass
from typing import Any

from jobs.timeline import KINDS, Timeline

COLOURS = {
    "request": "#4e79a7",
    "queue": "#bab0ac",
    "delivery": "#59a14f",
    "drs": "#f28e2b",
    "ims": "#b07aa1",
    "semrush": "#76b7b2",
    "publish": "#edc948",
}
OUTCOME_COLOURS = {"completed": "#59a14f", "failed": "#e15759", "needs_reauth": "#f28e2b", "cancelled": "#bab0ac"}


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


@dataclass(frozen=True)
class Row:
    label: str
    kind: str
    note: str
    duration: str
    x: float
    y: float
    width: float
    text_y: float
    indent: float
    colour: str

    @property
    def bar_y(self) -> float:
        return self.y + 3

    @property
    def after_x(self) -> float:
        """Where the duration is written, right of the bar."""
        return round(self.x + self.width + 4, 1)


def waterfall(timeline: Timeline, *, width: int = 960, label_width: int = 320, row_height: int = 20) -> dict[str, Any]:
    """Rows (a bar each, on a shared time axis) and axis ticks for `timeline`."""
    top, plot = 24, width - label_width - 90
    total = timeline.total or 0.001
    scale = plot / total
    rows = []
    for i, s in enumerate(timeline.segments):
        y = top + i * row_height
        rows.append(
            Row(
                label=s.label,
                kind=s.kind,
                note=s.note,
                duration=seconds(s.duration),
                x=round(label_width + s.start * scale, 1),
                y=y,
                width=round(max(1.0, s.duration * scale), 1),
                text_y=y + row_height - 6,
                indent=6 + 12 * s.depth,
                colour=COLOURS.get(s.kind, "#999999"),
            )
        )
    ticks = [{"x": round(label_width + total * f / 4 * scale, 1), "label": seconds(total * f / 4)} for f in range(5)]
    return {
        "width": width,
        "height": top + len(rows) * row_height + 8,
        "rows": rows,
        "ticks": ticks,
        "label_width": label_width,
        "total": seconds(timeline.total),
        "legend": [{"kind": k, "label": v, "colour": COLOURS[k]} for k, v in KINDS.items()],
    }


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


def hourly_bars(
    hours: list[tuple[str, dict[str, tuple[int, str]]]], *, width: int = 960, height: int = 160
) -> dict[str, Any]:
    """Stacked bars, one per hour, from `hours`: `[(label, {outcome: (count, href)})]` oldest first."""
    left, bottom = 40, 20
    plot_w, plot_h = width - left - 10, height - bottom - 10
    peak = max((sum(c for c, _ in counts.values()) for _, counts in hours), default=0) or 1
    slot = plot_w / max(1, len(hours))
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
                    x=round(left + i * slot + 1, 1),
                    y=round(base, 1),
                    width=round(max(1.0, slot - 2), 1),
                    height=round(h, 1),
                    colour=OUTCOME_COLOURS[outcome],
                    href=href,
                )
            )
        if len(hours) <= 24 or i % 24 == 0:
            labels.append(
                {"x": round(left + i * slot + slot / 2, 1), "text": label[-5:-3] if len(hours) <= 24 else label[:10]}
            )
    return {
        "width": width,
        "height": height,
        "blocks": blocks,
        "labels": labels,
        "peak": peak,
        "axis_y": height - bottom,
        "left": left,
        "legend": [{"outcome": k, "label": k.replace("_", " "), "colour": v} for k, v in OUTCOME_COLOURS.items()],
    }
