"""Every admission policy's ``matchPolicy`` and ``namespaceSelector``, and its binding's, pinned (issue #21, item 20).

Each of these one-word mutations left the unit suite green: ``matchPolicy: Equivalent`` → ``Exact`` on
the DRA claim policy (a claim sent as ``resource.k8s.io/v1beta2`` would then skip it), the DRA pool
binding selecting namespaces *without* a label (``Exists`` → ``DoesNotExist``), a binding's
selector dropped (then it binds the platform's own namespaces too). The table says what each one is,
written out here, not read from the code; a policy the table does not know fails until it is pinned.

Every stack variant that renders a policy is planned: the tests' own stacks (tests/stacks), each with elastic quotas
switched, and the DRA variants (on-prem ``tests/stacks/onprem-dra.yaml``, AKS with ``resourceModel: dra``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from components.loader import read_stack_file
from components.plan.offline import ROOT, Run, run_program
from tests.conftest import fixture_config

TEAM_NAMESPACES = {"matchExpressions": [{"key": "gpuaas.io/team", "operator": "Exists"}]}
EVERY_NAMESPACE = None
UNSET = None  # matchPolicy not written: the API's default, Equivalent

#: policy → (its matchPolicy, its namespaceSelector, its binding's namespaceSelector)
PINNED: dict[str, tuple[str | None, dict[str, Any] | None, dict[str, Any] | None]] = {
    # Team networks: only team namespaces are checked (the operators' own NADs are theirs).
    "gpuaas-team-networks": (UNSET, TEAM_NAMESPACES, TEAM_NAMESPACES),
    "gpuaas-team-networks-immutable": (UNSET, TEAM_NAMESPACES, TEAM_NAMESPACES),
    # A VF of a partition in a namespace that is not its team's: refused in every namespace.
    "gpuaas-team-partition": (UNSET, EVERY_NAMESPACE, EVERY_NAMESPACE),
    # AKS: a team pod on another team's pool; bound to every team namespace (no pool label: no pool).
    "gpuaas-team-node-pool": (UNSET, EVERY_NAMESPACE, TEAM_NAMESPACES),
    # DRA: claims and templates, every served version converted to v1 for the CEL.
    "gpuaas-team-claims": ("Equivalent", TEAM_NAMESPACES, TEAM_NAMESPACES),
    # DRA on AKS: pods that claim devices select their team's pool, and a team without one only
    # pools no team owns (issue #21 item 12): every team namespace, as the device-plugin pool guard.
    "gpuaas-team-dra-node-pool": (UNSET, EVERY_NAMESPACE, TEAM_NAMESPACES),
    # Elastic quotas: GPU workloads go through the team's queue, in team namespaces.
    **{
        f"gpuaas-team-queue-{kind}": (UNSET, TEAM_NAMESPACES, TEAM_NAMESPACES)
        for kind in ("pods", "jobs", "jobsets", "pytorchjobs", "mpijobs", "deployments", "statefulsets", "replicasets")
    },
    # Elastic quotas: no forged controller ownerReference, no unsuspend but Kueue's, in team namespaces.
    "gpuaas-team-queue-owners": (UNSET, TEAM_NAMESPACES, TEAM_NAMESPACES),
    **{
        f"gpuaas-team-queue-suspend-{kind}": (UNSET, TEAM_NAMESPACES, TEAM_NAMESPACES)
        for kind in ("jobs", "jobsets", "pytorchjobs", "mpijobs")
    },
}


def _variants() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for stack in ("onprem", "aks"):
        config = fixture_config(stack)
        yield stack, stack, config
        switched = copy.deepcopy(config)
        queues = switched.setdefault("gpuaas:queues", {})
        queues["elastic"] = not queues.get("elastic", False)
        yield f"{stack}-elastic-{'on' if queues['elastic'] else 'off'}", stack, switched
    yield "onprem-dra", "onprem", read_stack_file(ROOT / "tests" / "stacks" / "onprem-dra.yaml")
    aks_dra = copy.deepcopy(fixture_config("aks"))
    aks_dra["gpuaas:gpuOperator"]["resourceModel"] = "dra"
    aks_dra["gpuaas:platform"]["kubernetesVersion"] = "1.35.7"
    aks_dra["gpuaas:gpuOperator"]["dra"] = {"cdiEnabled": True}  # Ubuntu 22.04 pools: acknowledged
    yield "aks-dra", "aks", aks_dra


VARIANTS = list(_variants())
_RUNS: dict[str, Run] = {}


def _run(variant: str) -> Run:
    if variant not in _RUNS:
        _, stack, config = next(v for v in VARIANTS if v[0] == variant)
        _RUNS[variant] = run_program(stack, config=config)
    return _RUNS[variant]


def _objects(run: Run, kind: str) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in run.records if r.type.endswith(f":{kind}")}


@pytest.mark.parametrize("variant", [v[0] for v in VARIANTS])
def test_every_policy_and_binding_is_as_pinned(variant: str) -> None:
    run = _run(variant)
    policies = _objects(run, "ValidatingAdmissionPolicy")
    bindings = _objects(run, "ValidatingAdmissionPolicyBinding")
    assert policies, variant
    assert set(policies) <= set(PINNED), f"pin these in PINNED: {sorted(set(policies) - set(PINNED))}"
    assert set(bindings) == set(policies), "every policy has one binding, named like it"
    for name, pol in policies.items():
        match_policy, selects, binds = PINNED[name]
        constraints = pol["spec"]["matchConstraints"]
        assert constraints.get("matchPolicy") == match_policy, (variant, name)
        assert constraints.get("namespaceSelector") == selects, (variant, name)
        spec = bindings[name]["spec"]
        assert spec["policyName"] == name and spec["validationActions"] == ["Deny"], (variant, name)
        assert spec.get("matchResources", {}).get("namespaceSelector") == binds, (variant, name)


def test_every_pinned_policy_is_rendered_by_some_variant() -> None:
    """The table is not larger than the code: a policy removed must be unpinned on purpose."""
    rendered = {name for v in VARIANTS for name in _objects(_run(v[0]), "ValidatingAdmissionPolicy")}
    assert rendered == set(PINNED)
