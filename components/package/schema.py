"""Write or check ``provider/schema.json``: the schema the gpuaas component provider serves.

The schema is inferred by Pulumi's component provider host from :mod:`components.package.provider`
(its declarations and the generated :mod:`components.package.types`); committed so that a reader,
an editor and a review see the package's interface, and checked current by the unit suite.

    python -m components.package.schema [--check]   # (python -m components.package.generate runs it)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.package import provider

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMA_FILE = ROOT / "provider" / "schema.json"


def text() -> str:
    return json.dumps(provider.schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="write or check provider/schema.json")
    p.add_argument("--check", action="store_true", help="exit 1 when provider/schema.json is stale")
    a = p.parse_args(argv)
    want = text()
    if SCHEMA_FILE.exists() and SCHEMA_FILE.read_text() == want:
        return 0
    if a.check:
        print(f"stale: {SCHEMA_FILE.relative_to(ROOT)} (run python -m components.package.generate)")
        return 1
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(want)
    print(f"wrote {SCHEMA_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
