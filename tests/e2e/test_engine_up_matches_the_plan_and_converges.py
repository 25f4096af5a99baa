"""The real Pulumi engine: `pulumi up`, `preview`, `refresh` and `destroy` of the onprem stack.

One control plane and one local file backend for the module; the tests run in file order on
the same stack (each leaves the stack converged on the checked-in config). What runs is the
repository's program under the Pulumi CLI, our Python language host and
pulumi-resource-kubernetes (e2e/toolchain.py: which versions, and why); the operators' Helm
releases install stand-in charts of their upstream CRDs, and the test plays the Network
Operator for the NicClusterPolicy's ``pulumi.com/waitFor`` (e2e/engine.py).
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.guards import mig
from components.k8s import SKIP_AWAIT
from components.plan.offline import run_program
from components.plan.writer import HELM_RELEASE
from e2e import upstream
from e2e.controlplane import ControlPlane
from e2e.engine import NetworkOperatorStandIn, Stack, repo_stack_config
from e2e.kube import Kube
from e2e.plan_apply import (
    crd_index,
    install_crds,
    node_objects,
    planned_objects,
    stack_namespaces,
    stored_differences,
)
from tests.conftest import offline_run
from tests.e2e.conftest import _say, need_upstream, start_plane

ROOT = Path(__file__).resolve().parents[2]
BASE = repo_stack_config("onprem")["config"]
MIG_GROUP = 0  # platform.nodeGroups[0] is h100-mig in Pulumi.onprem.yaml
MIG_NODE = "gpu-node-05"
MIG_LABEL = "nvidia.com/mig.config"


@dataclasses.dataclass
class Deployed:
    cp: ControlPlane
    stack: Stack
    up_seconds: float
    operator: NetworkOperatorStandIn

    @property
    def kube(self) -> Kube:
        return self.cp.kube


@pytest.fixture(scope="module")
def deployed(pytestconfig: pytest.Config) -> Iterator[Deployed]:
    """`pulumi up` of the checked-in onprem stack from empty, against a fresh control plane."""
    need_upstream()
    cp = start_plane(pytestconfig, "engine")
    try:
        ctx = BASE["gpuaas:platform"]["kubeconfigContext"]
        kubeconfig = cp.write_kubeconfig(cp.workdir / "engine.kubeconfig", context=ctx)
        # No kubelet registers the nodes the stack labels: create them as a kubelet would.
        for node in node_objects(offline_run("onprem")):
            cp.kube.create(node)
        # The Prometheus stack gpuaas plugs into (observability) brings its CRDs and namespaces;
        # without them the program refuses before any monitor (components/observability).
        prometheus = crd_index([upstream.root() / "prometheus-operator-v0.93.0" / "crds"])
        install_crds(cp.kube, prometheus.values())
        for ns in stack_namespaces(planned_objects(offline_run("onprem"))):
            cp.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        stack = Stack(kubeconfig)
        _say(pytestconfig, f"e2e: engine: {stack.version()} (pulumi-resource-kubernetes from {stack.bins[1]})")
        stack.init()
        with NetworkOperatorStandIn(cp.kube) as operator:
            up = stack.up()
            _say(pytestconfig, f"e2e: engine: pulumi up of onprem from empty in {up.seconds:.1f} s")
            yield Deployed(cp, stack, up.seconds, operator)
        if not os.environ.get("GPUAAS_E2E_KEEP"):
            shutil.rmtree(stack.workdir, ignore_errors=True)
    finally:
        cp.stop()


def converge(d: Deployed, config: dict[str, Any] | None = None) -> None:
    """Back to ``config`` (default: the checked-in one) and up, so the next test starts there."""
    d.stack.write_config(config if config is not None else BASE)
    d.stack.up()


def with_team(config: dict[str, Any], team: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    out["gpuaas:teams"] = [*out["gpuaas:teams"], team]
    return out


def steps(preview: dict[str, Any]) -> dict[str, set[str]]:
    """op -> URNs of a `pulumi preview --json` (``same`` left out)."""
    out: dict[str, set[str]] = {}
    for s in preview.get("steps", []):
        if s["op"] != "same":
            out.setdefault(s["op"], set()).add(s["urn"])
    return out


def urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[1]


def urn_type(urn: str) -> str:
    return urn.split("::")[2].rsplit("$", 1)[-1]


def helm_release(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    """The Helm release record the provider stored (Helm's ``sh.helm.release.v1`` Secret)."""
    secrets = kube.list("v1", "Secret", namespace, selector=f"owner=helm,name={name},status=deployed")
    assert len(secrets) == 1, f"no deployed Helm release {namespace}/{name}: {[s['metadata']['name'] for s in secrets]}"
    raw = base64.b64decode(base64.b64decode(secrets[0]["data"]["release"]))
    return dict(json.loads(gzip.decompress(raw)))


# --------------------------------------------------------------------------------------------
# up from empty: the API server holds what the offline plan says


def test_up_from_empty_matches_the_offline_plan(deployed: Deployed) -> None:
    run = offline_run("onprem")
    problems: list[str] = []
    for p in planned_objects(run):
        meta = p.obj["metadata"]
        stored = deployed.kube.get(p.obj["apiVersion"], p.obj["kind"], meta["name"], meta.get("namespace"))
        if stored is None:
            problems.append(f"{p.ref}: not in the API server")
            continue
        problems += [f"{p.ref}: {d}" for d in stored_differences(p.obj, stored)]
        annotations = stored["metadata"].get("annotations") or {}
        if SKIP_AWAIT in annotations and SKIP_AWAIT not in (meta.get("annotations") or {}):
            # Only the test-only switch adds it, and only to kinds a kubelet would make ready.
            assert p.obj["kind"] in {"DaemonSet", "Job", "Service", "Deployment", "Pod", "StatefulSet"}, p.ref
    assert not problems, "\n".join(problems)

    # Everything the engine created is in the plan, and nothing more (same names, same count).
    planned = {
        (p.obj["kind"], p.obj["metadata"].get("namespace"), p.obj["metadata"]["name"]) for p in planned_objects(run)
    }
    created = set()
    for r in deployed.stack.resources():
        typ = r["type"]
        if not typ.startswith("kubernetes:") or typ.startswith("pulumi:providers") or typ == HELM_RELEASE:
            continue
        if r.get("external"):
            continue  # a read (`.get`: the observability CRDs the Prometheus stack brings), not created
        out = r.get("outputs") or {}
        meta = out.get("metadata") or {}
        created.add((out.get("kind"), meta.get("namespace"), meta.get("name")))
    assert created == planned

    # The Helm releases: our name, namespace, chart version and values, installed by Helm for real.
    for rec in (r for r in run.records if r.type == HELM_RELEASE):
        rel = helm_release(deployed.kube, rec.inputs["name"], rec.inputs["namespace"])
        assert rel["config"] == rec.inputs["values"], rec.name
        assert rel["chart"]["metadata"]["version"] == rec.inputs["version"].lstrip("v")
        assert rel["info"]["status"] == "deployed"
    # ... and the CRDs their charts hold are there, so the custom resources that followed found them.
    assert deployed.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "nicclusterpolicies.mellanox.com")
    assert deployed.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "clusterpolicies.nvidia.com")
    # `up` waited for the Network Operator (played by the test) to report the policy ready.
    assert deployed.operator.reported == {"nic-cluster-policy"}
    # The stack's outputs are the offline run's outputs.
    outputs = deployed.stack.outputs()
    for key, value in run.outputs.items():
        if key not in run.secret_outputs:
            assert outputs[key] == value, key


# --------------------------------------------------------------------------------------------
# idempotence


def test_preview_of_the_same_config_has_no_changes(deployed: Deployed) -> None:
    res = deployed.stack.preview("--expect-no-changes")
    assert res.rc == 0


def test_reversed_teams_preview_has_no_changes(deployed: Deployed) -> None:
    config = copy.deepcopy(BASE)
    config["gpuaas:teams"] = list(reversed(config["gpuaas:teams"]))
    deployed.stack.write_config(config)
    try:
        deployed.stack.preview("--expect-no-changes")
    finally:
        deployed.stack.write_config(BASE)


# --------------------------------------------------------------------------------------------
# adding and retiring a team

ROBOTICS = {"name": "robotics", "groups": ["oidc:team-robotics"], "quota": {"cpu": "64", "memory": "512Gi"}}


def test_adding_a_team_previews_creates_of_that_team_only(deployed: Deployed) -> None:
    config = with_team(BASE, ROBOTICS)
    deployed.stack.write_config(config)
    try:
        ops = steps(deployed.stack.preview_json())
    finally:
        deployed.stack.write_config(BASE)
    created = {(urn_type(u), urn_name(u)) for u in ops.pop("create", set())}
    # What the offline plan adds for the team is what the engine will create, nothing else.
    before = {(r.type, r.name) for r in offline_run("onprem").records}
    after = {(r.type, r.name) for r in run_program("onprem", config=config).records}
    assert created == after - before
    assert created and all("robotics" in name for _, name in created)
    # Nothing else changes: no update, replace or delete of another team's (or anything's)
    # object. Inherent: the MIG guard's StackReference to the stack itself is read on every run.
    reads = {
        "gpuaas-last-run",
        *(f"gpuaas-observability-needs-{c}-crd" for c in ("prometheusrules", "servicemonitors")),
    }
    assert {op: {urn_name(u) for u in urns} for op, urns in ops.items()} == {"read": reads}, ops


def test_removing_a_protected_team_fails_and_the_retire_path_works(deployed: Deployed) -> None:
    converge(deployed, with_team(BASE, ROBOTICS))
    assert deployed.kube.get("v1", "Namespace", "robotics") is not None
    try:
        deployed.stack.write_config(BASE)
        refused = deployed.stack.up(check=False)
        assert refused.rc != 0
        assert "protected" in refused.out and "robotics" in refused.out, refused.out[-3000:]
        assert deployed.kube.get("v1", "Namespace", "robotics") is not None
        # The documented retire path: protect: false, up, then remove the team.
        converge(deployed, with_team(BASE, {**ROBOTICS, "protect": False}))
        converge(deployed, BASE)
        gone = deployed.kube.get("v1", "Namespace", "robotics")
        assert gone is None or gone["status"]["phase"] == "Terminating"
        deployed.kube.wait_for(
            "namespace robotics deleted", lambda: deployed.kube.get("v1", "Namespace", "robotics") is None, 120
        )
    finally:
        if deployed.kube.get("v1", "Namespace", "robotics") is not None:
            converge(deployed, with_team(BASE, {**ROBOTICS, "protect": False}))
        converge(deployed, BASE)


# --------------------------------------------------------------------------------------------
# the MIG guard over the real stack's last outputs


def mig_label(kube: Kube) -> str:
    node = kube.get("v1", "Node", MIG_NODE)
    assert node is not None
    return str(node["metadata"]["labels"].get(MIG_LABEL))


def test_mig_layout_change_needs_reconfigure(deployed: Deployed) -> None:
    old = BASE["gpuaas:platform"]["nodeGroups"][MIG_GROUP]["mig"]["layout"]
    new = "1x4g.40gb-2x1g.10gb"  # one 1g.10gb fewer per GPU: the MIG teams' 1g quotas go down to fit
    assert mig_label(deployed.kube) == old
    # The guard compares with what the real stack exported on its last run.
    assert deployed.stack.outputs()[mig.OUTPUT]["h100-mig"] == old
    config = copy.deepcopy(BASE)
    config["gpuaas:platform"]["nodeGroups"][MIG_GROUP]["mig"]["layout"] = new
    for team in config["gpuaas:teams"]:
        if "1g.10gb" in team["quota"].get("mig", {}):
            team["quota"]["mig"]["1g.10gb"] = 8
    try:
        deployed.stack.write_config(config)
        stopped = deployed.stack.up(check=False)
        assert stopped.rc != 0
        assert f"gpuaas:platform.nodeGroups[{MIG_GROUP}].mig" in stopped.out, stopped.out[:5000]
        assert old in stopped.out and new in stopped.out
        assert mig_label(deployed.kube) == old  # not relabelled
        assert deployed.stack.outputs()[mig.OUTPUT]["h100-mig"] == old  # still the last applied

        config["gpuaas:platform"]["nodeGroups"][MIG_GROUP]["mig"]["reconfigure"] = True
        converge(deployed, config)
        assert mig_label(deployed.kube) == new
        assert deployed.stack.outputs()[mig.OUTPUT]["h100-mig"] == new
    finally:
        back = copy.deepcopy(BASE)
        back["gpuaas:platform"]["nodeGroups"][MIG_GROUP]["mig"]["reconfigure"] = True
        converge(deployed, back)
        converge(deployed, BASE)
    assert mig_label(deployed.kube) == old


# --------------------------------------------------------------------------------------------
# an interrupted update

TWO_TEAMS = [
    {**ROBOTICS, "protect": False},
    {"name": "robotics-2", "groups": ["oidc:team-robotics-2"], "protect": False, "quota": {"cpu": "32"}},
]


def start_up(s: Stack) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"],
        cwd=s.project,
        env=s.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def interrupt_part_way(d: Deployed, sig: signal.Signals) -> str:
    """Start an update that adds two teams and send ``sig`` once the first new object exists."""
    config = BASE
    for team in TWO_TEAMS:
        config = with_team(config, team)
    d.stack.write_config(config)
    proc = start_up(d.stack)
    try:
        d.kube.wait_for(
            "the update under way", lambda: d.kube.get("v1", "Namespace", "robotics") is not None, 300, 0.05
        )
        os.killpg(proc.pid, sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode != 0, out[-3000:]
    return out


def assert_two_teams_converged(d: Deployed) -> None:
    d.stack.preview("--expect-no-changes")
    for team in TWO_TEAMS:
        ns = str(team["name"])
        assert d.kube.get("v1", "Namespace", ns) is not None, ns
        assert d.kube.list("v1", "ResourceQuota", ns), ns


def test_cancelled_update_then_up_converges(deployed: Deployed) -> None:
    """SIGINT (Ctrl-C, a CI job's cancel): the engine finishes what is in flight, saves and unlocks."""
    try:
        interrupt_part_way(deployed, signal.SIGINT)
        again = deployed.stack.up(check=False)
        assert again.rc == 0, again.out[-4000:]
        assert_two_teams_converged(deployed)
    finally:
        converge(deployed, BASE)


def test_killed_update_recovers_with_cancel_then_up(deployed: Deployed) -> None:
    """SIGKILL: nothing is cleaned up. The file backend keeps the update's lock, so the next `up`
    is refused with the `pulumi cancel` hint; after that one step, `up` converges."""
    try:
        interrupt_part_way(deployed, signal.SIGKILL)
        refused = deployed.stack.up(check=False)
        assert refused.rc != 0
        assert "the stack is currently locked" in refused.out and "pulumi cancel" in refused.out, refused.out[-4000:]
        deployed.stack.pulumi("cancel", "--yes")
        again = deployed.stack.up(check=False)
        assert again.rc == 0, again.out[-4000:]
        assert_two_teams_converged(deployed)
    finally:
        converge(deployed, BASE)


# --------------------------------------------------------------------------------------------
# refresh keeps what another field manager owns


def test_refresh_keeps_another_managers_label(deployed: Deployed) -> None:
    kube = deployed.kube
    ns = "vision"
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"example.com/cost-center": "ml-42"}},
        },
        manager="someone-else",
        force=False,
    )
    # Refresh records the live object: the one namespace whose outputs now hold the other
    # manager's label (pulumi counts that as "1 updated"); nothing else, and no input changes,
    # so the next preview proposes nothing (server-side apply: the label is not our field).
    refreshed = deployed.stack.pulumi("refresh", "--yes")
    # Reads are re-read too: the last-run StackReference and the observability CRD reads
    # (`.get`, which a refresh reports as updated with the fields it fetched).
    updated = set(re.findall(r"^ +~ +\S+ (\S+) updated", refreshed.out, re.M))
    reads = {
        "gpuaas-last-run",
        *(f"gpuaas-observability-needs-{c}-crd" for c in ("prometheusrules", "servicemonitors")),
    }
    assert updated <= {"gpuaas-teams-vision-namespace", *reads}, refreshed.out[-3000:]
    deployed.stack.preview("--expect-no-changes")
    deployed.stack.up()
    stored = kube.get("v1", "Namespace", ns)
    assert stored is not None
    assert stored["metadata"]["labels"]["example.com/cost-center"] == "ml-42"
    assert stored["metadata"]["labels"]["gpuaas.io/team"] == ns


# --------------------------------------------------------------------------------------------
# policy pack, for real


def policy_pack(d: Deployed) -> Path:
    """A copy of policy/ whose virtualenv (PulumiPolicy.yaml: venv) is the shared .venv."""
    dest = d.stack.workdir / "policy"
    if not dest.exists():
        shutil.copytree(ROOT / "policy", dest, ignore=shutil.ignore_patterns("venv", "__pycache__"))
        (dest / "venv").symlink_to(ROOT / ".venv")
    return dest


def test_policy_pack_passes_the_checked_in_stack(deployed: Deployed) -> None:
    res = deployed.stack.preview("--policy-pack", str(policy_pack(deployed)))
    # The pack ran (the engine lists it) and reported nothing.
    assert "Policy Packs run:" in res.out and f"gpuaas|local|{policy_pack(deployed)}" in res.out, res.out[-3000:]
    assert "Policy Violations" not in res.out and "mandatory" not in res.out, res.out[-3000:]


ROGUE = """
# test_engine: the repository's program plus one namespace that breaks a policy on purpose.
import runpy, pulumi_kubernetes as k8s
runpy.run_path("{main}", run_name="__main__")
k8s.core.v1.Namespace("rogue-team", metadata={{"name": "rogue", "labels": {{"gpuaas.io/team": "rogue"}}}})
"""


def test_policy_pack_blocks_a_team_namespace_without_quota(deployed: Deployed) -> None:
    main = deployed.stack.project / "__main__.py"
    main.unlink()
    main.write_text(ROGUE.format(main=ROOT / "__main__.py"))
    try:
        res = deployed.stack.preview("--policy-pack", str(policy_pack(deployed)), check=False)
    finally:
        main.unlink()
        main.symlink_to(ROOT / "__main__.py")
    assert res.rc != 0
    assert "team-namespace-quota-and-limits" in res.out, res.out[-3000:]
    assert "rogue" in res.out
    assert deployed.kube.get("v1", "Namespace", "rogue") is None


# --------------------------------------------------------------------------------------------
# destroy: protect refuses, retainOnDelete keeps (last: it tears the stack down)


def test_destroy_refuses_protected_and_leaves_retained(deployed: Deployed) -> None:
    kube = deployed.kube
    teams = [t["name"] for t in BASE["gpuaas:teams"]]
    labels_before = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.list("v1", "Node")}
    refused = deployed.stack.pulumi("destroy", "--yes", check=False)
    assert refused.rc != 0
    assert "protected" in refused.out, refused.out[-3000:]
    for team in teams:
        assert kube.get("v1", "Namespace", team) is not None, team
    # Unprotecting is the deliberate step protect asks for; then destroy goes through.
    deployed.stack.pulumi("state", "unprotect", "--all", "--yes")
    deployed.stack.pulumi("destroy", "--yes")
    assert deployed.stack.resources() == []
    # retainOnDelete: the node labels (MIG layout, device-plugin config) stay on the nodes.
    for name, labels in labels_before.items():
        node = kube.get("v1", "Node", name)
        assert node is not None
        assert node["metadata"]["labels"].get(MIG_LABEL) == labels.get(MIG_LABEL), name
    assert kube.get("v1", "Node", MIG_NODE)["metadata"]["labels"][MIG_LABEL] == "1x4g.40gb-3x1g.10gb"  # type: ignore[index]
    for team in teams:
        gone = kube.get("v1", "Namespace", team)
        assert gone is None or gone["status"]["phase"] == "Terminating", team
