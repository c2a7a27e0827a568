"""`python -m scripts.soak` (`make soak`): see the package's docstring."""

import json
import sys
from pathlib import Path

from scripts import stack as stacks
from scripts.soak.config import Config
from scripts.soak.harness import run
from scripts.soak.report import as_json, table, write_report


def main(argv: list[str]) -> int:
    config = Config.from_env()
    try:
        result = run(config)
    except stacks.Failed as failure:
        print(f"\nmake soak: {failure}", flush=True)
        return 2
    if not result.broken:
        stacks.drop_database(config.database_url)  # kept when broken, for a look at what happened
    if "--no-report" not in argv:
        write_report(result)
    if "--json" in argv:
        Path(argv[argv.index("--json") + 1]).write_text(json.dumps(as_json(result), indent=1))
    print("\n" + table(result), flush=True)
    if result.broken:
        print("\nmake soak: broken: " + "; ".join(i.name for i in result.broken), flush=True)
        return 1
    print("\nEvery invariant holds." + ("" if "--no-report" in argv else " Written to docs/soak.md."), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
