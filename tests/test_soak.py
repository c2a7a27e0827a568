"""The soak of `make soak` (scripts/soak/), sized for the suite: a fixed seed, a few dozen generations, every
fault kind at least once, each invariant at its bound. And a Semrush that forgets idempotency (a broken
guarantee, switched on in the simulator alone) makes the soak fail, naming the invariant it broke.

The soak runs as `make soak` runs it, in its own process against its own database and its own stack; the test
reads the JSON result. Nothing here bounds a duration: the settle bound is the harness's, and what is asserted
is what happened.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings

from scripts.stack import drop_database

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.worker, pytest.mark.solo]

CI_SEED, CI_JOBS, CI_MINUTES, CI_FAULT_EVERY = "2601", "24", "0.6", "1.5"


def soak(tmp_path: Path, name: str, port_offset: int, **env) -> tuple[int, dict, str]:
    test_db = settings.DATABASES["default"]["TEST"]["NAME"] or "test_serenity"
    url = urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/soak_{name}_{test_db}"))
    out = tmp_path / f"{name}.json"
    child = {**os.environ, "SOAK_DATABASE_URL": url, "SOAK_BASELINE": "0", **env}
    if os.environ.get("SOAK_FIRST_PORT"):  # a range of ports to stay in, when the machine is shared
        child["SOAK_FIRST_PORT"] = str(int(os.environ["SOAK_FIRST_PORT"]) + port_offset)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "scripts.soak", "--no-report", "--json", str(out)],
            cwd=ROOT,
            env=child,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        drop_database(url)  # a broken run keeps its database for a look; a test leaves nothing behind
    for kept in re.findall(r"logs kept in (\S+)", proc.stdout):
        shutil.rmtree(kept, ignore_errors=True)
    result = json.loads(out.read_text()) if out.exists() else {}
    return proc.returncode, result, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_a_short_soak_with_every_fault_kind_keeps_every_invariant(tmp_path):
    from scripts.soak import DRS_FAULTS, FAULT_KINDS

    code, result, output = soak(
        tmp_path,
        "ci",
        0,
        SOAK_SEED=CI_SEED,
        SOAK_JOBS=CI_JOBS,
        SOAK_MINUTES=CI_MINUTES,
        SOAK_FAULT_EVERY=CI_FAULT_EVERY,
    )

    assert result, output
    assert {i["name"]: i["count"] for i in result["invariants"] if not i["holds"]} == {}, output
    assert code == 0, output
    assert set(result["faults"]) == set(FAULT_KINDS) | set(DRS_FAULTS)
    assert sum(result["outcomes"].values()) == int(CI_JOBS)
    assert all(o == "COMPLETED" or o.startswith("FAILED ") for o in result["outcomes"]), result["outcomes"]
    assert result["flows"]["create"] > 0 and result["flows"]["activate"] > 0 and result["flows"]["regenerate"] > 0
    assert result["flows"]["re-authorise"] > 0


def test_a_semrush_that_forgets_idempotency_fails_the_soak_naming_duplicate_prompts(tmp_path):
    code, result, output = soak(
        tmp_path,
        "broken",
        10,
        SOAK_SEED=CI_SEED,
        SOAK_JOBS="6",
        SOAK_MINUTES="0.25",
        SOAK_FAULT_EVERY="1",
        SOAK_FAULTS="Semrush write answer lost",
        SANDBOX_SEMRUSH_FORGET_IDEMPOTENCY="true",
    )

    assert code == 1, output
    broken = [i for i in result["invariants"] if not i["holds"]]
    assert [i["name"] for i in broken] == ["duplicate prompts in any Semrush project"], output
    assert broken[0]["count"] > 0
    assert "make soak: broken: duplicate prompts in any Semrush project" in output
