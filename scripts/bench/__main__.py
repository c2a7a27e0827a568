"""`python -m scripts.bench [SCENARIO ...]` (`make bench`): see the package's docstring."""

import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from scripts.bench import fit
from scripts.bench.config import MACHINE, PROFILE, PROFILES, REPORT, ROWS_JSON, SCENARIOS, SIZE, SIZES_REFUSED
from scripts.bench.harness import wrk_binary
from scripts.bench.report import write_report
from scripts.bench.scenarios import Bench
from scripts.stack import Failed


def heading(ran: list[str]) -> str:
    """The machine, the sizes derived for it and the connections the largest scenario needs."""
    assert MACHINE is not None  # main() refused the run otherwise
    return (
        f"make bench ({PROFILE}): {MACHINE.describe()}\n"
        f"  sizes: budgets {SIZE.budget_jobs} jobs on {SIZE.budget_processes} × {SIZE.budget_threads} threads "
        f"(DRS limit {SIZE.budget_drs_limit}); semrush {SIZE.semrush_jobs} jobs on {SIZE.semrush_processes} × "
        f"{SIZE.semrush_threads}; scaleout {SIZE.scaleout_jobs} jobs on {SIZE.scaleout_threads} threads; pools: API "
        f"{SIZE.api_pool}, simulators {SIZE.sim_pool}, worker {SIZE.worker_pool} (BENCH_SET overrides)\n"
        f"  {fit.arithmetic(SIZE, MACHINE, ran)}"
    )


def main() -> int:
    started, t0 = datetime.now(UTC), time.monotonic()
    asked = " ".join(sys.argv[1:]) or os.environ.get("BENCH_SCENARIOS", "")
    ran = [name for name in SCENARIOS if name in asked.replace(",", " ").split()] if asked.strip() else [*SCENARIOS]
    unknown = set(asked.replace(",", " ").split()) - set(SCENARIOS)
    if unknown or not ran:
        print(f"make bench: unknown scenario(s) {sorted(unknown)}; choose among {', '.join(SCENARIOS)}")
        return 2
    if PROFILE not in PROFILES:
        print(f"make bench: unknown BENCH_PROFILE {PROFILE!r}; choose among {', '.join(PROFILES)}")
        return 2
    if SIZES_REFUSED:
        print(f"make bench: {SIZES_REFUSED}")
        return 2
    print(heading(ran), flush=True)
    bench = Bench()
    try:
        if "poll" in ran:
            wrk_binary()
        bench.start()
        for name in ran:
            print(f"--- {name}", flush=True)
            bench.scenario = name
            {
                "poll": bench.poll,
                "create": bench.create_markets,
                "activate": bench.activate,
                "worker": bench.worker,
                "scale": bench.scale,
                "fairness": bench.fairness,
                "wait": bench.wait,
                "budgets": bench.budgets,
                "semrush": bench.semrush,
                "scaleout": bench.scaleout,
            }[name]()
    except Failed as failure:
        print(f"\nmake bench: {failure}\n(logs in {bench.var})", flush=True)
        bench.runner.stop_all()
        return 1
    except BaseException:
        bench.runner.stop_all()
        raise
    bench.runner.stop_all()
    if ROWS_JSON:
        keys = ("scenario", "what", "measured", "ratio", "target")
        Path(ROWS_JSON).write_text(json.dumps([dict(zip(keys, row, strict=True)) for row in bench.rows], indent=1))
    if REPORT:
        write_report(bench, started, time.monotonic() - t0, ran)
    print("\n" + bench.table() + (f"\n\nWritten to {REPORT}" if REPORT else ""), flush=True)
    shutil.rmtree(bench.var, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
