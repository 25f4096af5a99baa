"""The scale benchmark's fleet accepted by the real server; namespaces deleted; an API server restart.

The 1000-node / 256-team plan is the fleet the scale benchmark claims: every one of its objects
must be accepted, object size limits included (a ConfigMap's data over 1 MiB is refused by the
API server's validation). The faults: a team namespace deleted by the real namespace controller
(finalizers done, not left ``Terminating``), and a restarted kube-apiserver with the state in
etcd intact and clients reconnecting.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from components.plan.offline import run_program
from e2e.controlplane import running
from e2e.plan_apply import apply_plan, planned_objects
from tests.e2e.conftest import AppliedStack, need_upstream

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_scale", ROOT / "benchmarks" / "plan_scale.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["plan_scale"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_scale_benchmarks_1000_node_256_team_plan_is_accepted() -> None:
    """On a control plane of its own: nothing another test left behind (a policy) may decide it."""
    need_upstream()
    raw = _bench().synthetic_config(1000, 256)
    run = run_program("onprem", config=raw)
    with running() as cp:
        applied = apply_plan(cp.kube, run)
        assert len(applied) == len(planned_objects(run)) > 1000
        teams = cp.kube.list("v1", "Namespace", selector="gpuaas.io/team")
        assert len(teams) >= 256


def test_deleting_a_team_namespace_completes(onprem: AppliedStack) -> None:
    kube = onprem.kube
    ns = "gpuaas-e2e-retired"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"gpuaas.io/team": "x"}}})
    kube.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "data", "namespace": ns}, "data": {"k": "v"}}
    )
    kube.delete("v1", "Namespace", ns)
    kube.wait_for(f"namespace {ns} gone", lambda: kube.get("v1", "Namespace", ns) is None, timeout=90)


def test_state_survives_an_api_server_restart(onprem: AppliedStack) -> None:
    kube = onprem.kube
    before = {
        (a.planned.obj["kind"], a.planned.obj["metadata"].get("namespace"), a.planned.obj["metadata"]["name"])
        for a in onprem.applied
    }
    onprem.cp.restart_apiserver()
    # The same client reconnects (its calls retry while the server is down).
    for kind, ns, name in sorted(before, key=str):
        api = next(a.planned.obj["apiVersion"] for a in onprem.applied if a.planned.obj["kind"] == kind)
        assert kube.get(api, kind, name, ns) is not None, (kind, ns, name)
    # And the plan applies again as a no-op after the restart.
    again = apply_plan(kube, onprem.run)
    assert len(again) == len(onprem.applied)


@pytest.mark.parametrize("stack", ["onprem"])
def test_the_restarted_server_still_enforces_admission(onprem: AppliedStack, stack: str) -> None:
    from components.tenancy.networks import nad_name
    from tests.e2e.conftest import wait_until_refused
    from tests.e2e.test_teams_are_isolated_from_each_other import OWN_NAD_ONLY, PAIRS, TEAMS, member, pod

    a, b = PAIRS[0]
    wait_until_refused(onprem.kube, pod(a, "x", networks=f"{b}/{nad_name(TEAMS[b])}"), member(TEAMS[a]), OWN_NAD_ONLY)
