"""`make bench` (scripts/bench/), sized for the suite: every scenario at a few requests and a handful of jobs
with DRS in milliseconds (BENCH_PROFILE=ci), as `make bench` runs it, in its own process against its own
database and stack. A scenario that breaks fails here rather than in a newcomer's `make bench`.

What is asserted is that each scenario ran to its end, passed its own sanity checks and wrote rows with
numbers; never a ratio or a time (those are the full run's, on a quiet machine).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings

from scripts.stack import drop_database

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.worker

NUMBER = re.compile(r"\d")


def run_bench(tmp_path: Path, *scenarios: str) -> tuple[int, list[dict], str, str]:
    if shutil.which("wrk") is None and os.geteuid() != 0:
        pytest.skip("the poll scenario measures over HTTP with wrk: install it (Debian: apt-get install wrk)")
    test_db = settings.DATABASES["default"]["TEST"]["NAME"] or "test_serenity"
    url = urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/bench_{test_db}"))
    rows, report = tmp_path / "rows.json", tmp_path / "benchmarks.md"
    env = {
        **os.environ,
        "BENCH_PROFILE": "ci",
        "BENCH_DATABASE_URL": url,
        "BENCH_ROWS_JSON": str(rows),
        "BENCH_REPORT": str(report),
    }
    for inherited in ("DJANGO_SETTINGS_MODULE", "AWS_ENDPOINT_URL", "LOCAL_BASE_URL", "SERENITY_ENVIRONMENT"):
        env.pop(inherited, None)  # the bench's stack sets its own
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "scripts.bench", *scenarios],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        drop_database(url)
    output = proc.stdout[-6000:] + proc.stderr[-4000:]
    return (
        proc.returncode,
        json.loads(rows.read_text()) if rows.exists() else [],
        report.read_text() if report.exists() else "",
        output,
    )


def test_every_scenario_of_make_bench_runs_to_its_end_and_writes_rows_with_numbers(tmp_path):
    from scripts.bench import SCENARIOS

    code, rows, report, output = run_bench(tmp_path)

    assert code == 0, output
    assert {row["scenario"] for row in rows} == set(SCENARIOS), output
    for row in rows:
        assert NUMBER.search(row["measured"]), row
        if row["target"]:
            assert re.fullmatch(r"[\d.e+-]+×", row["ratio"]), row
            assert row["target"].endswith(("met", "NOT met")), row
    # The report is one run: every scenario's table, each headed by the same run's date.
    headings = re.findall(r"^#### (\w+)\n\n`make bench` of ([^(]+) \(", report, re.MULTILINE)
    assert [name for name, _when in headings] == list(SCENARIOS), report
    assert len({when for _name, when in headings}) == 1, report
    assert report.count("Machine: ") == 1, report


def test_bench_set_changes_the_sizes_it_names_and_refuses_what_it_does_not_know():
    from scripts.bench.config import PROFILES, sizes_set

    full = PROFILES["full"]
    sized = sizes_set(full, " scaleout_jobs=256, scaleout_threads = 128 ")
    assert (sized.scaleout_jobs, sized.scaleout_threads) == (256, 128)
    assert sized.budget_jobs == full.budget_jobs and sizes_set(full, "") == full
    for wrong, said in (
        ("nope=1", "unknown size 'nope'"),
        ("budget_jobs=many", "must be an integer"),
        ("env=1", "env"),
    ):
        with pytest.raises(ValueError, match=said):
            sizes_set(full, wrong)


def test_make_bench_refuses_a_bench_set_that_does_not_parse_before_starting_anything():
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.bench", "scaleout"],
        cwd=ROOT,
        env={**os.environ, "BENCH_SET": "scaleout_jobs=lots"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "BENCH_SET: scaleout_jobs must be an integer" in proc.stdout


def test_the_default_sizes_fit_the_stock_machine_every_scenario_its_connections_within_the_servers():
    """`make bench` on the project's own machine (2 cores, PostgreSQL at 100 connections): the sizes it derives
    there leave every scenario within what the server admits, the stack's pools, beat, the harness and the
    scenario's workers together. A larger machine gets larger scenarios from the same arithmetic."""
    from scripts.bench.config import PROFILES, SCENARIOS
    from scripts.bench.fit import Machine, check, connections_needed, fit

    stock = Machine(cores=2, max_connections=100)
    sizes = fit(PROFILES["full"], stock)

    for name in SCENARIOS:
        needed = connections_needed(sizes, name)
        assert sum(needed.values()) <= stock.available, (name, needed)
    check(sizes, stock, SCENARIOS)
    # Two cores carry two worker processes, not four; the Semrush burst runs at production's defaults.
    assert (sizes.budget_processes, sizes.semrush_processes) == (2, 2)
    assert (sizes.semrush_budget, sizes.semrush_limit, sizes.semrush_threads) == (8, 10, 512)
    assert sizes.semrush_jobs >= 200
    larger = fit(PROFILES["full"], Machine(cores=8, max_connections=400))
    assert (larger.budget_processes, larger.budget_jobs, larger.worker_pool) == (4, 2000, 16)
    check(larger, Machine(cores=8, max_connections=400), SCENARIOS)


def test_sizes_that_do_not_fit_are_refused_naming_the_sums():
    from scripts.bench.config import PROFILES, SCENARIOS
    from scripts.bench.fit import DoesNotFit, Machine, check, fit

    small = Machine(cores=2, max_connections=60)
    with pytest.raises(DoesNotFit, match="PostgreSQL connections"):
        fit(PROFILES["full"], small)
    stock = Machine(cores=2, max_connections=100)
    with pytest.raises(DoesNotFit, match=r"budgets needs .*workers 64"):
        check(replace(fit(PROFILES["full"], stock), budget_processes=4), stock, SCENARIOS)


def test_a_wait_that_stalls_fails_naming_what_is_stuck_after_printing_where_it_is(db, monkeypatch, capsys):
    """No job ending for STALLED_AFTER_S ends the bench's wait at once (not after its whole bound), saying which
    jobs are stuck where: by phase, leased or not, never sent, the quietest one's last event."""
    import uuid

    from jobs import states
    from jobs.models import AsyncJob
    from scripts.bench import harness
    from scripts.stack import Failed

    monkeypatch.setattr(harness, "STALLED_AFTER_S", 1.2)
    monkeypatch.setattr(harness, "PROGRESS_EVERY_S", 0.4)
    job = AsyncJob.objects.create(
        id=uuid.uuid4(), job_type="generateSemrushMarket", organization_id=uuid.uuid4(), phase="generated"
    )
    states.record(job.id, "throttled", actor="bench", detail="SEMRUSH_THROTTLED: over the budget")
    bench = harness.Harness()

    with pytest.raises(Failed) as stuck:
        bench.wait_drained("budgets", timeout=1800)

    said = str(stuck.value)
    assert "budgets: jobs still IN_PROGRESS none ended for 1.2 s" in said
    assert "1 IN_PROGRESS: 0 leased, 1 waiting for a delivery" in said and "by phase: generated 1" in said
    assert "never sent: 1" in said and "last event throttled" in said
    assert "… budgets: 0 of 1 ended" in capsys.readouterr().out
