"""Both stacks' offline plans, applied to a real API server: accepted, stored as sent, idempotent."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from e2e.controlplane import ControlPlane
from e2e.plan_apply import PlanRefusedError, apply_plan, planned_objects, stored_differences
from tests.conftest import offline_run
from tests.e2e.conftest import AppliedStack, need_upstream

# Also run on the oldest supported Kubernetes minor (`make e2e`; pyproject.toml's markers).
pytestmark = pytest.mark.every_minor


@pytest.fixture(params=["onprem", "aks"])
def applied(request: pytest.FixtureRequest) -> AppliedStack:
    return request.getfixturevalue(str(request.param))


def test_every_object_is_accepted_in_install_order(applied: AppliedStack) -> None:
    planned = planned_objects(applied.run)
    assert planned, "the plan has Kubernetes objects"
    assert len(applied.applied) == len(planned)
    for a in applied.applied:
        assert a.stored["metadata"].get("resourceVersion"), a.planned.ref


def test_the_server_stores_what_was_sent(applied: AppliedStack) -> None:
    """Nothing pruned from a custom resource, nothing rewritten: the plan means what it says."""
    problems = {
        a.planned.ref: diffs
        for a in applied.applied
        if (diffs := stored_differences(a.planned.obj, a.stored))
        # A NodePatch applies only our labels: the stored Node has more, never less.
    }
    assert not problems, "\n".join(f"{ref}: {d}" for ref, ds in problems.items() for d in ds)


def _ours(obj: dict[str, Any], *, with_time: bool = True) -> tuple[Any, ...]:
    """What our apply owns: the spec generation and our field manager's entry (its time and fields);
    without its time, the object's content but for status and the server's bookkeeping instead."""
    entry = [m for m in obj["metadata"].get("managedFields", []) if m.get("manager") == "gpuaas-plan"]
    if with_time:
        return obj["metadata"].get("generation"), json.dumps(entry, sort_keys=True)
    content = copy.deepcopy(obj)
    content.pop("status", None)
    for k in ("managedFields", "resourceVersion"):
        content["metadata"].pop(k, None)
    for m in entry:
        m.pop("time", None)
    return obj["metadata"].get("generation"), json.dumps(entry, sort_keys=True), json.dumps(content, sort_keys=True)


def _status_applied_by_another(obj: dict[str, Any]) -> bool:
    return any(
        m.get("operation") == "Apply" and m.get("subresource") == "status" and m.get("manager") != "gpuaas-plan"
        for m in obj["metadata"].get("managedFields", [])
    )


def test_applying_twice_changes_nothing(applied: AppliedStack) -> None:
    """A second server-side apply of the same plan is a no-op for every object.

    Controllers write status (quota usage, Job status) at any moment, so "no change" is judged by
    what the apply itself would change: the generation and our manager's managedFields entry
    (a no-op apply leaves its timestamp as it was), compared with the object right before.

    One exception, from Kubernetes 1.35 on (1.35.4 and 1.37.2 do it, 1.34.4 did not): after
    another manager applied an object's status subresource server-side (the
    ValidatingAdmissionPolicy status controller does, for every policy), the next apply of the
    object stores it once more and stamps our entry anew although nothing changes (a third apply
    is a no-op again). For those objects the content, the generation and our fields must be
    unchanged, and our entry's time may move.
    """
    kube = applied.kube
    changed = []
    for a in applied.applied:
        obj = a.planned.obj
        meta = obj["metadata"]
        current = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        assert current is not None, a.planned.ref
        again = kube.apply(obj, manager="gpuaas-plan")
        with_time = not _status_applied_by_another(current)
        if _ours(again, with_time=with_time) != _ours(current, with_time=with_time):
            changed.append(a.planned.ref)
    assert not changed, f"a second apply changed: {changed}"


def test_admission_policies_type_check_without_warnings(applied: AppliedStack) -> None:
    """The API server type-checks every ValidatingAdmissionPolicy against the kinds it matches (its
    status controller writes ``status.typeChecking``): no expression draws a warning, on any minor."""
    kube = applied.kube
    warnings: dict[str, Any] = {}
    for a in applied.applied:
        obj = a.planned.obj
        if obj["kind"] != "ValidatingAdmissionPolicy":
            continue
        name = obj["metadata"]["name"]

        def checked(name: str = name, api_version: str = obj["apiVersion"]) -> dict[str, Any] | None:
            live = kube.get(api_version, "ValidatingAdmissionPolicy", name) or {"metadata": {}}
            status: dict[str, Any] = live.get("status", {})
            return status if status.get("observedGeneration") == live["metadata"].get("generation") else None

        status = kube.wait_for(f"the type check of {name}", checked, timeout=60)
        warnings[name] = status.get("typeChecking", {}).get("expressionWarnings", [])
    assert warnings, "the plan has admission policies"
    assert not any(warnings.values()), {k: v for k, v in warnings.items() if v}


def test_node_labels_coexist_with_another_field_manager(onprem: AppliedStack) -> None:
    kube = onprem.kube
    node = next(a for a in onprem.applied if a.planned.obj["kind"] == "Node")
    name = node.planned.obj["metadata"]["name"]
    ours = node.planned.obj["metadata"]["labels"]
    kube.apply(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"example.com/rack": "r12"}}},
        manager="someone-else",
    )
    apply_plan(kube, onprem.run)  # our manager applies again, with force
    labels = kube.get("v1", "Node", name)["metadata"]["labels"]  # type: ignore[index]
    assert labels["example.com/rack"] == "r12", "another manager's label survives our apply"
    for k, v in ours.items():
        assert labels[k] == v


def test_a_refused_object_fails_with_the_servers_message(control_plane: ControlPlane) -> None:
    """A plan the server refuses stops at that object, naming it, with the server's own message."""
    need_upstream()
    run = copy.deepcopy(offline_run("onprem"))
    quota = next(r for r in run.records if r.inputs.get("kind") == "ResourceQuota")
    quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] = "12XB"
    with pytest.raises(PlanRefusedError) as err:
        apply_plan(control_plane.kube, run)
    assert err.value.planned.obj["metadata"]["name"] == quota.inputs["metadata"]["name"]
    assert err.value.error.status >= 400
    assert "quantities must match the regular expression" in str(err.value)
    # The allowed twin: the same object with a valid quantity is stored.
    quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] = "12"
    stored = control_plane.kube.apply(quota.inputs)
    assert stored["spec"]["hard"]["requests.nvidia.com/gpu"] == "12"
