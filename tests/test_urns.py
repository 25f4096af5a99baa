"""URNs are a contract: a refactor that moves a resource (new type, new parent) replaces it on the next
``pulumi up`` unless the resource carries an alias from where it was (issue #33, item 2).

Every resource each stack registers under the SDK's mocks, as the engine keys its state: type, logical
name, parent URN, aliases and provider reference; and what each resource waits for (its dependencies:
the plan's files do not show the order of cluster objects, so this is where a moved ``depends_on``
shows). Compared with the snapshots in ``tests/urns/``, first recorded on the code before the components
took their own arguments (dd21b02). A change that must move a resource adds an ``aliases`` entry naming
the old URN and updates the snapshot in the same commit (``GPUAAS_RECORD_URNS=1 pytest
tests/test_urns.py`` rewrites it). The old code's URNs stay checked in, apart from the snapshots, in
``tests/urns/before-33/`` (the URNs of the snapshots as recorded on dd21b02): every one of them is still
registered, or a resource now elsewhere answers to it through an alias, so re-recording a snapshot can
never hide a moved resource.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from pulumi.runtime.proto import alias_pb2

from components.plan.offline import ROOT, Record, Run, run_program, stack_config
from tests.conftest import STACKS, offline_run

SNAPSHOTS = Path(__file__).parent / "urns"
#: The URNs every stack registered before issue #33 moved any resource (dd21b02): sorted lists, never re-recorded.
BEFORE = SNAPSHOTS / "before-33"
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
                # A component's own dependencies order nothing (its children carry theirs), and
                # passing ordering as ResourceOptions puts them there now: only resources' are compared.
                "dependencies": r.dependencies if r.custom else None,
            }
            for r in run.records
        ),
        key=lambda e: e["urn"],
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_resource_keeps_its_urn_parent_provider_and_order(case: str) -> None:
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


def _urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """A URN as the SDK's mock monitor makes it (``MockMonitor.make_urn``: the parent's last type only), so
    that an alias resolves to the form the old snapshots were recorded in; the engine's form (the parent's
    whole type chain) is as consistent between old URN and alias."""
    if parent:
        type_ = parent.split("::")[2].split("$")[-1] + "$" + type_
    return f"urn:pulumi:{stack}::{project}::{type_}::{name}"


def answers_to(record: Record) -> set[str]:
    """Every URN ``record``'s state may be found under: its own and each alias's (unset alias fields are the
    resource's own: name, type, parent, stack, project; ``noParent`` is the root)."""
    stack = record.urn.split("::")[0].removeprefix("urn:pulumi:")
    project = record.urn.split("::")[1]
    out = {record.urn}
    for text in record.aliases:
        if not text.startswith("spec"):
            out.add(text)  # a whole URN (``aliasURNs``)
            continue
        spec = text_format.Parse(text, alias_pb2.Alias()).spec
        parent = "" if spec.noParent else spec.parentUrn or record.parent
        type_, name = spec.type or record.type, spec.name or record.name
        out.add(_urn(spec.stack or stack, spec.project or project, parent, type_, name))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_old_urn_is_still_registered_or_aliased(case: str) -> None:
    """Issue #33, item 2: no resource the old code registered is deleted and created again on the next ``up``."""
    stack, path = CASES[case]
    run = offline_run(stack) if path is None else run_program(stack, config=stack_config(stack, path))
    before = json.loads((BEFORE / f"{case}.json").read_text())
    found = {urn for r in run.records for urn in answers_to(r)}
    assert [urn for urn in before if urn not in found] == [], "a resource moved without an alias from its old URN"
    # A resource of the same type and name under a new URN is a moved one: it answers to its old URN.
    old: dict[tuple[str, str], set[str]] = {}
    for urn in before:
        old.setdefault((urn.split("::")[2].split("$")[-1], urn.rsplit("::", 1)[1]), set()).add(urn)
    moved = [r for r in run.records if r.urn not in before and (r.type, r.name) in old]
    for r in moved:
        assert old[(r.type, r.name)] & answers_to(r), (r.urn, sorted(old[(r.type, r.name)]), r.aliases)


def test_an_alias_resolves_to_the_old_urn_and_nothing_else() -> None:
    """The twin of the test above: a moved resource without an alias answers to its new URN only, so the
    old URN is missed; with ``Alias(parent=old parent)`` it answers to the old one."""
    old = "urn:pulumi:s::p::gpuaas:index:AksCluster$azure-native:containerservice:AgentPool::pool"
    cluster = "urn:pulumi:s::p::gpuaas:index:Platform$gpuaas:index:AksCluster::c"
    moved = Record(
        urn="urn:pulumi:s::p::gpuaas:index:AksNdPool$azure-native:containerservice:AgentPool::pool",
        type="azure-native:containerservice:AgentPool",
        name="pool",
        custom=True,
        inputs={},
        parent="urn:pulumi:s::p::gpuaas:index:AksCluster$gpuaas:index:AksNdPool::pool",
        dependencies=[],
        provider="",
        protect=True,
        ignore_changes=[],
        delete_before_replace=False,
    )
    assert old not in answers_to(moved)
    aliased = replace(moved, aliases=[f'spec {{   parentUrn: "{cluster}" }}'])
    assert answers_to(aliased) == {moved.urn, old}
    renamed = replace(moved, aliases=[f'spec {{   name: "other"   parentUrn: "{cluster}" }}'])
    assert old not in answers_to(renamed)
