"""Regenerate the committed OpenAPI schema, docs/openapi.yaml, from the code (drf-spectacular).

    .venv/bin/python scripts/export_openapi.py           # rewrite docs/openapi.yaml
    .venv/bin/python scripts/export_openapi.py --check   # exit 1 when the committed file has drifted

Run it after changing a view, a serializer or a route of the API, and commit the result with the change:
tests/serenity/test_openapi.py fails while the two differ.
"""

import argparse
import difflib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "docs" / "openapi.yaml"
REGENERATE = ".venv/bin/python scripts/export_openapi.py"


def generate() -> bytes:
    """The schema as served at /api/schema, rendered as YAML and validated against OpenAPI 3."""
    from django.core.management import call_command

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "openapi.yaml"
        call_command("spectacular", file=str(out), validate=True)
        return out.read_bytes()


def drift(generated: bytes, committed: bytes) -> str:
    """A unified diff from the committed schema to the generated one (empty when they match)."""
    return "".join(
        difflib.unified_diff(
            committed.decode().splitlines(keepends=True),
            generated.decode().splitlines(keepends=True),
            fromfile="docs/openapi.yaml (committed)",
            tofile="docs/openapi.yaml (generated)",
        )
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report drift instead of rewriting the file")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "serenity.settings")
    # A developer's tool, never deployed: the schema is the same in every environment.
    os.environ.setdefault("SERENITY_ENVIRONMENT", "local")
    import django

    django.setup()
    generated = generate()
    if args.check:
        diff = drift(generated, SCHEMA_FILE.read_bytes() if SCHEMA_FILE.exists() else b"")
        if diff:
            sys.stdout.write(diff)
            sys.stderr.write(f"docs/openapi.yaml is out of date: run `{REGENERATE}` and commit it.\n")
            return 1
        return 0
    SCHEMA_FILE.write_bytes(generated)
    sys.stdout.write(f"wrote {SCHEMA_FILE.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
