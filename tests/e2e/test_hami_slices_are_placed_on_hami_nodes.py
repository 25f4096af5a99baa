"""HAMi slices after admission: placed on a HAMi node by a scheduler named as HAMi's, run by KWOK.

**HAMi's scheduler extender did not run here** (nothing of HAMi builds: its Go module is refused by
the proxy). What runs is a stand-in: a second upstream kube-scheduler of the control plane's
version, started with HAMi's own KubeSchedulerConfiguration as the real chart renders it for the
plan's values (profile ``hami-scheduler``), minus the extender, signed in as HAMi's scheduler
ServiceAccount with only the RBAC the chart and gpuaas give it. In place of the extender's
``managedResources``, kube-scheduler is told to ignore HAMi's per-slice memory, cores, percentage
and priority (``NodeResourcesFit.ignoredResources``, as kube-scheduler itself does for an extender's
``ignoredByScheduler`` resources) and keeps counting slices against the node. So this proves the
node side and the placement, not HAMi's per-card booking of memory and cores.

The nodes are KWOK nodes named and labelled as the plan labels them (its NodePatches): the HAMi
node advertises what HAMi's device plugin would — every GPU ``deviceSplitCount`` times (HAMi
docs/config.md, "devicePlugin.deviceSplitCount: ... Maximum tasks assigned to a simple GPU device"),
computed here from the stack, under the renamed resource — and no memory or cores (HAMi books
those per card in node annotations); a whole-GPU node advertises ``nvidia.com/gpu``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from components import platform_args
from components.model import hami, resources
from components.operators import hami as hami_operator
from components.plan.offline import Run, run_program, stack_config
from e2e import helm_template
from e2e.controlplane import ControlPlane
from e2e.kube import Identity, Kube
from e2e.kwok_nodes import kwok_node
from e2e.plan_apply import apply_plan
from e2e.upstream import root as upstream_root
from tests.e2e.conftest import need_upstream, wait_until_refused
from tests.hami_cases import HAMI_STACK, TEAM, hami_cfg, hami_pod

MEMBER: Final = Identity("alice@example.com", ("oidc:team-inference",))
QA_MEMBER: Final = Identity("carol@example.com", ("oidc:platform-qa",))
HAMI_NODE: Final = "gpu-node-06"
WHOLE_NODE: Final = "gpu-node-01"
STANDIN: Final = "hami-scheduler-standin"


def advertised_slices() -> int:
    """What HAMi's device plugin registers on the HAMi node: its GPUs times deviceSplitCount."""
    raw_group = next(g for g in hami_cfg().onprem.node_groups if g.hami is not None)  # type: ignore[union-attr]
    assert raw_group.hami is not None
    return raw_group.gpus_per_node * raw_group.hami.split_count


def plan_labels(run: Run, node: str) -> dict[str, str]:
    patch = next(r for r in run.of_type("kubernetes:core/v1:NodePatch") if r.inputs["metadata"]["name"] == node)
    return dict(patch.inputs["metadata"]["labels"])


def standin_config(rendered: list[dict[str, Any]], kubeconfig: Path) -> dict[str, Any]:
    """HAMi's rendered KubeSchedulerConfiguration without its extender (see the module docstring)."""
    cm = next(d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "hami-scheduler")
    config = copy.deepcopy(yaml.safe_load(cm["data"]["config.yaml"]))
    (extender,) = config.pop("extenders")
    ignored = [
        m["name"]
        for m in extender["managedResources"]
        if m["ignoredByScheduler"] and m["name"] in resources.HAMI_RESOURCES and m["name"] != resources.HAMI_GPU
    ]
    assert sorted(ignored) == sorted(set(resources.HAMI_RESOURCES) - {resources.HAMI_GPU})
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == hami.SCHEDULER_NAME
    profile["pluginConfig"] = [{"name": "NodeResourcesFit", "args": {"ignoredResources": ignored}}]
    return config


class Fleet:
    def __init__(self, cp: ControlPlane, run: Run) -> None:
        self.cp, self.run = cp, run

    @property
    def kube(self) -> Kube:
        return self.cp.kube


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    need_upstream()
    cp = ControlPlane(kwok=True)
    cp.start()
    try:
        kube = cp.kube
        run = run_program("onprem", config=stack_config("onprem", HAMI_STACK))
        # The nodes first, as KWOK's (the plan's NodePatches then put its labels on them).
        kube.create(kwok_node(HAMI_NODE, capacity={resources.HAMI_GPU: str(advertised_slices())}))
        kube.create(kwok_node(WHOLE_NODE, capacity={resources.GPU: "8"}))
        apply_plan(kube, run)
        # The GPU Operator's toolkit creates this RuntimeClass (gpu-operator values operator.runtimeClass);
        # HAMi's device plugin names it, and pods are refused without it.
        runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}}
        kube.apply({**runtime_class, "handler": "nvidia"}, manager="nvidia-gpu-operator")
        values = run.named("gpuaas-hami-release").inputs["values"]
        rendered = helm_template.render(
            upstream_root() / "charts" / "hami-2.10.0", hami.RELEASE, hami.NAMESPACE, values, cp.version().lstrip("v")
        )
        for doc in rendered:
            if doc["kind"] == "Job":
                continue
            if kube.resource(doc["apiVersion"], doc["kind"]).namespaced:
                doc["metadata"].setdefault("namespace", hami.NAMESPACE)
            kube.apply(doc, manager="helm")
        token = kube.request(
            "POST",
            f"/api/v1/namespaces/{hami.NAMESPACE}/serviceaccounts/{hami.SCHEDULER_SERVICE_ACCOUNT}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
        )["status"]["token"]
        kubeconfig = cp.write_kubeconfig(cp.workdir / f"{STANDIN}.kubeconfig", token=token)
        config = cp.workdir / f"{STANDIN}.yaml"
        config.write_text(yaml.safe_dump(standin_config(rendered, kubeconfig)))
        cp.start_named_scheduler(STANDIN, config)
        for node in (HAMI_NODE, WHOLE_NODE):
            kube.wait_for(f"{node} schedulable", lambda node=node: _schedulable(kube, node), timeout=90)
        for ns in (TEAM, "platform-qa"):
            kube.wait_for(
                f"{ns} quota status",
                lambda ns=ns: _quota_status(kube, ns),
                timeout=90,
            )
        unscheduled = hami_pod("probe")
        del unscheduled["spec"]["schedulerName"]
        wait_until_refused(kube, unscheduled, MEMBER, "gpuaas-team-hami")
        yield Fleet(cp, run)
    finally:
        cp.stop()


def _quota_status(kube: Kube, ns: str) -> Any:
    return (kube.get("v1", "ResourceQuota", "gpuaas-team-quota", ns) or {}).get("status", {}).get("hard")


def _schedulable(kube: Kube, node: str) -> bool:
    n = kube.get("v1", "Node", node) or {}
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
    tainted = any(t["key"] == "node.kubernetes.io/not-ready" for t in n.get("spec", {}).get("taints", []))
    return ready and not tainted


def test_the_hami_node_carries_the_plans_labels_and_advertises_slices_only(fleet: Fleet) -> None:
    node = fleet.kube.get("v1", "Node", HAMI_NODE)
    assert node is not None
    labels = node["metadata"]["labels"]
    assert {k: labels[k] for k in plan_labels(fleet.run, HAMI_NODE)} == plan_labels(fleet.run, HAMI_NODE)
    assert labels[resources.GPU_DEPLOY_DEVICE_PLUGIN_LABEL] == "false"  # NVIDIA's device plugin stays off
    allocatable = node["status"]["allocatable"]
    assert allocatable[resources.HAMI_GPU] == "80" and resources.GPU not in allocatable
    assert not set(allocatable) & {resources.HAMI_MEMORY, resources.HAMI_CORES}


def test_hamis_device_plugin_daemonset_wants_the_hami_node_alone(fleet: Fleet) -> None:
    """The real DaemonSet controller decides where the rendered device plugin runs."""
    kube = fleet.kube
    ds = kube.wait_for(
        "hami-device-plugin's desired pods",
        lambda: (
            (d := kube.get("apps/v1", "DaemonSet", "hami-device-plugin", hami.NAMESPACE))
            and d.get("status", {}).get("desiredNumberScheduled") is not None
            and d
        ),
        timeout=60,
    )
    assert ds["status"]["desiredNumberScheduled"] == 1, ds["status"]
    pods = kube.wait_for(
        "hami-device-plugin's pod",
        lambda: kube.list("v1", "Pod", hami.NAMESPACE, selector="app.kubernetes.io/component=hami-device-plugin"),
        timeout=60,
    )
    terms = pods[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [f["values"] for t in terms["nodeSelectorTerms"] for f in t["matchFields"]] == [[HAMI_NODE]]


def test_the_gpu_operators_driver_and_toolkit_validations_want_the_hami_node_alone(fleet: Fleet) -> None:
    """Where the Operator's own validator is off (it would wait for nvidia.com/gpu*, issue 34), gpuaas's
    node validation runs: on the HAMi node, not on the whole-GPU node, which keeps the Operator's."""
    kube = fleet.kube
    ns = hami_operator.node_validation_daemonset(platform_args.hami(hami_cfg()))["metadata"]["namespace"]
    # The GPU Operator creates its validator's ServiceAccount (assets/state-operator-validation/0100_*.yaml).
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": hami_operator.VALIDATOR_SERVICE_ACCOUNT, "namespace": ns},
    }
    kube.apply(sa, manager="nvidia-gpu-operator")
    labels = kube.get("v1", "Node", HAMI_NODE)["metadata"]["labels"]  # type: ignore[index]
    assert labels[resources.GPU_DEPLOY_OPERATOR_VALIDATOR_LABEL] == "false"
    whole = kube.get("v1", "Node", WHOLE_NODE)["metadata"]["labels"]  # type: ignore[index]
    assert resources.GPU_DEPLOY_OPERATOR_VALIDATOR_LABEL not in whole
    pods = kube.wait_for(
        f"{hami_operator.NODE_VALIDATION}'s pod",
        lambda: kube.list("v1", "Pod", ns, selector=f"app.kubernetes.io/name={hami_operator.NODE_VALIDATION}"),
        timeout=120,
    )
    terms = pods[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [f["values"] for t in terms["nodeSelectorTerms"] for f in t["matchFields"]] == [[HAMI_NODE]]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]


def test_a_team_members_slices_are_placed_on_the_hami_node_by_hamis_scheduler_name(fleet: Fleet) -> None:
    kube = fleet.kube
    kube.create(hami_pod("two-slices", slices=2, memory_mib=20480, cores=50), as_=MEMBER)
    pod = kube.wait_for(
        "two-slices Running",
        lambda: (p := kube.get("v1", "Pod", "two-slices", TEAM)) and p["status"].get("phase") == "Running" and p,
        timeout=90,
    )
    assert pod["spec"]["nodeName"] == HAMI_NODE
    events = [e for e in kube.list("v1", "Event", TEAM) if e["involvedObject"]["name"] == "two-slices"]
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    assert scheduled and scheduled[0].get("reportingComponent") == hami.SCHEDULER_NAME, events
    assert HAMI_NODE in scheduled[0]["message"]


def test_slices_beyond_what_the_node_has_stay_pending_with_the_schedulers_reason(fleet: Fleet) -> None:
    """platform-qa may hold 80 slices (its ceiling); the node has 80 and two-slices holds 2 of them."""
    kube = fleet.kube
    kube.wait_for("two-slices bound", lambda: (kube.get("v1", "Pod", "two-slices", TEAM) or {})["spec"].get("nodeName"))
    kube.create(hami_pod("all-slices", ns="platform-qa", slices=80, memory_mib=1024, cores=0), as_=QA_MEMBER)

    def failed() -> list[dict[str, Any]]:
        return [
            e
            for e in kube.list("v1", "Event", "platform-qa")
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "all-slices"
        ]

    message = kube.wait_for("FailedScheduling of all-slices", failed, timeout=90)[0]["message"]
    assert f"Insufficient {resources.HAMI_GPU}" in message, message
    assert f"Insufficient {resources.HAMI_MEMORY}" not in message, message  # HAMi's to book, not the node's
    pod = kube.get("v1", "Pod", "all-slices", "platform-qa")
    assert pod is not None and not pod["spec"].get("nodeName")
