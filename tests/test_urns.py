"""URNs are a contract: a refactor that moves a resource (new type, new parent) replaces it on the next
``pulumi up`` unless the resource carries an alias from where it was (issue #33, item 2).

Every resource each stack registers under the SDK's mocks, as the engine keys its state: type, logical
name, parent URN, aliases and provider reference, compared with the snapshot in ``tests/urns/``. The
snapshots were recorded on the code before the components took their own arguments (the commit that
added this file), so they are the old code's URNs, not the new code's. A change that must move a
resource adds an ``aliases`` entry naming the old URN and updates the snapshot in the same commit
(``GPUAAS_RECORD_URNS=1 pytest tests/test_urns.py`` rewrites it; review the diff: an unchanged
``type``/``parent`` with a new alias is the proof).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from components.plan.offline import ROOT, Run, run_program, stack_config
from tests.conftest import STACKS, offline_run

SNAPSHOTS = Path(__file__).parent / "urns"
#: The stacks and the variant stack files (tests/stacks/) whose URNs are recorded.
CASES: dict[str, tuple[str, Path | None]] = {
    **{stack: (stack, None) for stack in STACKS},
    **{path.stem: (path.stem.split("-")[0], path) for path in sorted((ROOT / "tests" / "stacks").glob("*.yaml"))},
}


def urns(run: Run) -> list[dict[str, Any]]:
    """What the engine keys a resource's state by, one entry per registration, sorted by URN."""
    return sorted(
        (
            {
                "urn": r.urn,
                "type": r.type,
                "name": r.name,
                "parent": r.parent,
                "aliases": r.aliases,
                "provider": r.provider,
            }
            for r in run.records
        ),
        key=lambda e: e["urn"],
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_resource_keeps_its_urn_parent_and_provider(case: str) -> None:
    stack, path = CASES[case]
    run = offline_run(stack) if path is None else run_program(stack, config=stack_config(stack, path))
    got = urns(run)
    snapshot = SNAPSHOTS / f"{case}.json"
    if os.environ.get("GPUAAS_RECORD_URNS") == "1":
        snapshot.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert snapshot.is_file(), f"no URN snapshot {snapshot}: record it on the unchanged code (GPUAAS_RECORD_URNS=1)"
    expected = json.loads(snapshot.read_text())
    assert [e["urn"] for e in got] == [e["urn"] for e in expected], "a resource's URN changed: add an alias"
    assert got == expected
