"""What every reuse test does: run a program written in the test under the SDK's mocks, with no gpuaas
stack config, and read back what it registered; and the one check every public component must pass,
that ordinary ``ResourceOptions`` reach each child (the SDK does not pass a component's ``depends_on``
or ``providers`` on by itself: ``components/k8s.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.plan.offline import Record, run_program

#: Builds one component named ``name`` with the program's options (each test module's ``COMPONENTS``).
Build = Callable[[str, pulumi.ResourceOptions], pulumi.ComponentResource]


def run(program: Callable[[], object]) -> list[Record]:
    """``program``'s registrations under the mocks, with no gpuaas stack config at all."""

    def main() -> None:
        program()

    return run_program("reuse", config={}, program=main).records


def objects(records: list[Record]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Each resource (not component) by logical name: (type, parent's logical name, inputs)."""
    return {r.name: (r.type, r.parent.rsplit("::", 1)[1], r.inputs) for r in records if r.custom}


def assert_depends_on_and_provider_reach_every_child(build: Build) -> None:
    """A component built with ``depends_on`` and a ``kubernetes`` provider of the program's own: every
    resource it creates waits for that dependency and is created through that provider."""

    def program() -> None:
        provider = k8s.Provider("theirs", context="their-cluster")
        first = k8s.core.v1.ConfigMap(
            "first", metadata={"name": "first"}, opts=pulumi.ResourceOptions(provider=provider)
        )
        build("it", pulumi.ResourceOptions(depends_on=[first], providers={"kubernetes": provider}))

    records = run(program)
    first = next(r.urn for r in records if r.name == "first")
    children = [r for r in records if r.custom and r.name.startswith("it-")]
    assert children
    for child in children:
        assert first in child.dependencies, f"{child.name} does not wait for the program's depends_on"
        assert child.provider.split("::")[-2] == "theirs", f"{child.name} is not on the program's provider"


def waits_for(records: list[Record], record: Record) -> set[str]:
    """Every URN ``record`` waits for, directly or through what it waits for (how the engine orders)."""
    by_urn = {r.urn: r for r in records}
    seen: set[str] = set()
    todo = list(record.dependencies)
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            todo.extend(by_urn[urn].dependencies if urn in by_urn else ())
    return seen
