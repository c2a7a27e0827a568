"""The report: the table, the JSON result and docs/soak.md."""

from collections import Counter

from scripts.soak.config import ROOT
from scripts.soak.model import Result


def table(result: Result) -> str:
    c = result.config
    lines = [
        f"Seed {c.seed}, {c.jobs} generations, {c.minutes:g} min of faults (one every ~{c.fault_every:g} s), "
        f"{result.seconds:.0f} s in all.",
        "",
        "| fault injected | count |",
        "| --- | --- |",
    ]
    lines += [f"| {kind} | {n} |" for kind, n in sorted(result.faults.items())]
    lines += ["", "| flow | count |", "| --- | --- |"]
    lines += [f"| {flow} | {n} |" for flow, n in sorted(result.flows.items())]
    lines += ["", "| generation outcome | count |", "| --- | --- |"]
    lines += [f"| {outcome} | {n} |" for outcome, n in sorted(result.outcomes.items())]
    lines += ["", "| invariant | count | bound | holds |", "| --- | --- | --- | --- |"]
    lines += [f"| {i.name} | {i.count} | {i.bound} | {'yes' if i.holds else '**NO**'} |" for i in result.invariants]
    if result.added:
        a = result.added
        lines += [
            "",
            "Added latency against a fault-free run of the same seed (seconds from a generation's first request to",
            f"its job's first end, {a['generations']:g} generations completed in both; the fault-free median is "
            f"{a['baseline_median']:.1f} s):",
            "",
            "| added latency | median | p95 |",
            "| --- | --- | --- |",
            f"| per generation | {a['median']:.1f} s | {a['p95']:.1f} s |",
        ]
    if result.explained:
        reasons = Counter(line.split(": ", 1)[1] for line in result.explained)
        lines += [
            "",
            "Within the bounds, explained by an injected fault (each listed by `make soak`):",
            "",
            "| explained | count |",
            "| --- | --- |",
        ]
        lines += [f"| {why} | {n} |" for why, n in sorted(reasons.items())]
    return "\n".join(lines)


def as_json(result: Result) -> dict:
    return {
        "faults": dict(result.faults),
        "outcomes": dict(result.outcomes),
        "flows": dict(result.flows),
        "invariants": [
            {"name": i.name, "count": i.count, "holds": i.holds, "detail": i.detail} for i in result.invariants
        ],
        "explained": result.explained,
        "added_latency": result.added,
    }


def write_report(result: Result) -> None:
    doc = ROOT / "docs" / "soak.md"
    text = doc.read_text() if doc.exists() else "# Soak\n"
    begin, end = "<!-- soak:begin -->", "<!-- soak:end -->"
    report = f"{begin}\nLatest `make soak`: {result.started:%Y-%m-%d %H:%M} UTC.\n\n{table(result)}\n{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + report + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + report + "\n"
    doc.write_text(text)
