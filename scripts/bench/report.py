"""The report: the machine's description and each scenario's table in docs/benchmarks.md."""

import os
import platform
import re
from datetime import datetime
from pathlib import Path

from scripts.bench import fit
from scripts.bench.config import DATABASE_URL, MACHINE, REPORT, SCENARIOS, SIZE, SIZES_SET
from scripts.bench.harness import Harness


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    memory = next(
        (
            int(line.split()[1]) // 1024 // 1024
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    import psycopg

    with psycopg.connect(DATABASE_URL) as conn:
        pg = (conn.execute("SHOW server_version").fetchone() or ("unknown",))[0]
    return (
        f"{os.cpu_count()} × {model}, {memory} GiB RAM, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, PostgreSQL {pg}"
    )


def write_report(bench: Harness, started: datetime, seconds: float, ran: list[str]) -> None:
    """One table per scenario between the bench markers: the scenarios that ran replace theirs, the others'
    tables (from an earlier run, with its date) stay."""
    doc = Path(REPORT)
    text = doc.read_text() if doc.exists() else ""
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    sections: dict[str, str] = {}
    if begin in text and end in text:
        block = text[text.index(begin) + len(begin) : text.index(end)]
        for part in re.split(r"\n(?=#### )", block):
            heading = re.match(r"#### (\w+)", part.strip())
            if heading and heading.group(1) in SCENARIOS:
                sections[heading.group(1)] = part.strip()
    when = f"{started:%Y-%m-%d %H:%M} UTC"
    sizes = f"; BENCH_SET={SIZES_SET}" if SIZES_SET.strip() else ""
    for name in ran:
        sections[name] = (
            f"#### {name}\n\n`make bench` of {when} ({', '.join(ran)} in {seconds:.0f} s{sizes})."
            f"\n\n{bench.table(name)}"
        )
    report = (
        f"{begin}\nMachine: {machine()}.\n"
        + (f"Sized for it: {MACHINE.describe()}; {fit.arithmetic(SIZE, MACHINE, ran)}.\n\n" if MACHINE else "\n")
        + "\n\n".join(sections[name] for name in SCENARIOS if name in sections)
        + f"\n{end}"
    )
    if begin in text and end in text:
        text = text[: text.index(begin)] + report + text[text.index(end) + len(end) :]
    else:
        text = (text or "# Benchmarks\n") + "\n" + report + "\n"
    doc.write_text(text)
