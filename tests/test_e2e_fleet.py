"""The simulated fleet's pure parts, without a control plane: KWOK's stages and the node oracle.

e2e/fleet.py rewrites KWOK's default stages (a Job's pod ends only as its test says, a deleted pod
is made terminal first, a pod marked not Ready is Ready again); tests/e2e/fleet_nodes.py computes
what each node of a stack carries from upstream documentation. Both are read here against what
they promise, with the upstream files they cite.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.loader import parse_config
from e2e.fleet import OUTCOME, fleet_stages
from tests.conftest import raw_stack
from tests.e2e.fleet_nodes import aks_node_name, aks_nodes, mig_devices, onprem_nodes, resource_slice

#: The shape of KWOK's default stages (the toolchain's kwok-stages.yaml), enough for the rewrite.
DEFAULT = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.phase, operator: In, values: [Pending]}
  next: {statusTemplate: "phase: Running"}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-complete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .status.phase, operator: In, values: [Running]}
  next: {statusTemplate: "exitCode: 0\\nreason: Completed\\nphase: Succeeded"}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: Exists}
  next: {delete: true}
"""


def _stages() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(fleet_stages(DEFAULT)) if d}


def _exprs(stage: dict[str, Any]) -> list[dict[str, Any]]:
    exprs: list[dict[str, Any]] = stage["spec"]["selector"]["matchExpressions"]
    return exprs


def test_a_jobs_pod_completes_or_fails_only_as_its_annotation_says() -> None:
    stages = _stages()
    key = f'.metadata.annotations["{OUTCOME}"]'
    complete, fail = stages["pod-complete"], stages["pod-fail"]
    assert {"key": key, "operator": "In", "values": ["succeed"]} in _exprs(complete)
    assert {"key": key, "operator": "In", "values": ["fail"]} in _exprs(fail)
    assert "phase: Succeeded" in complete["spec"]["next"]["statusTemplate"]
    failed = fail["spec"]["next"]["statusTemplate"]
    assert "phase: Failed" in failed and "exitCode: 1" in failed and "Succeeded" not in failed


def test_a_deleted_running_pod_is_made_terminal_before_it_goes() -> None:
    stages = _stages()
    terminate, delete = stages["pod-terminate"], stages["pod-delete"]
    assert {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]} in _exprs(terminate)
    assert "phase: Failed" in terminate["spec"]["next"]["statusTemplate"]
    assert {"key": ".status.phase", "operator": "In", "values": ["Succeeded", "Failed"]} in _exprs(delete)
    assert delete["spec"]["next"] == {"delete": True}


def test_a_running_pod_marked_not_ready_is_ready_again() -> None:
    phases = next(e for e in _exprs(_stages()["pod-ready"]) if e["key"] == ".status.phase")
    assert phases["values"] == ["Pending", "Running"]


@pytest.mark.parametrize(
    ("layout", "want"),
    [
        ("1x4g.40gb-3x1g.10gb", {"4g.40gb": 1, "1g.10gb": 3}),
        ("all-disabled", {}),
        # mig-parted's default config (gpu-operator v26.7.0 assets/state-mig-manager/0400_configmap.yaml)
        ("all-1g.10gb", {"1g.10gb": 7}),
        ("all-balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
    ],
)
def test_mig_devices_per_h100_come_from_the_layout_or_mig_parteds_defaults(layout: str, want: dict[str, int]) -> None:
    assert mig_devices(layout, None, "H100-80GB") == want


def test_onprem_nodes_advertise_what_the_device_plugins_would() -> None:
    cfg = parse_config(raw_stack("onprem"))
    nodes = {n.name: n for n in onprem_nodes(cfg)}
    full, mig, shared, worker = nodes["gpu-node-01"], nodes["gpu-node-05"], nodes["gpu-node-06"], nodes["cpu-worker-01"]
    assert full.capacity["nvidia.com/gpu"] == "8" and "nvidia.com/gpu.shared" not in full.capacity
    assert mig.capacity["nvidia.com/mig-4g.40gb"] == "8" and mig.capacity["nvidia.com/mig-1g.10gb"] == "24"
    assert "nvidia.com/gpu" not in mig.capacity  # mixed strategy: a MIG GPU is no whole GPU
    assert shared.capacity["nvidia.com/gpu.shared"] == "16" and "nvidia.com/gpu" not in shared.capacity
    # one VF per HCA (8) for each of the six partitions; none on the plain worker
    assert {k: v for k, v in full.capacity.items() if "/sriov" in k} == {
        f"nvidia.com/sriov800{i}": "8" for i in range(1, 7)
    }
    assert not any("/" in k for k in worker.capacity) and not worker.mellanox and not worker.labels
    # gpuaas's own labels come from the plan's NodePatches, not from the node's registration
    assert "gpuaas.io/node-group" not in full.labels and full.labels_after_plan["gpuaas.io/node-group"] == "h100-full"
    assert full.labels["feature.node.kubernetes.io/pci-15b3.present"] == "true"


def test_aks_nodes_carry_the_pool_labels_and_taints_one_node_per_pool_at_least() -> None:
    cfg = parse_config(raw_stack("aks"))
    nodes = aks_nodes(cfg)
    assert [n.group for n in nodes] == ["system", "ndh100a", "ndh100b"]
    nd = nodes[1]
    assert nd.name == aks_node_name("ndh100a", 0) == "aks-ndh100a-00000000-vmss000000"
    assert nd.labels["kubernetes.azure.com/agentpool"] == "ndh100a"
    assert nd.labels["node.kubernetes.io/instance-type"] == "Standard_ND96isr_H100_v5"
    assert nd.taints == [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"}]
    assert nd.capacity["rdma/hcashared"] == "1000" and nd.capacity["nvidia.com/gpu"] == "8"
    assert set(nd.ours) <= set(nd.labels)  # AKS puts the pool's nodeLabels on the node at once
    assert not nodes[0].taints and "nvidia.com/gpu" not in nodes[0].capacity
    more = aks_nodes(cfg, {"ndh100a": 3})
    assert [n.name for n in more if n.group == "ndh100a"] == [aks_node_name("ndh100a", i) for i in range(3)]


def test_the_dra_slice_has_a_device_per_gpu_or_mig_device() -> None:
    raw = raw_stack("onprem")
    nodes = {n.name: n for n in onprem_nodes(parse_config(raw))}
    full = resource_slice(nodes["gpu-node-01"])
    mig = resource_slice(nodes["gpu-node-05"])
    assert full is not None and mig is not None and resource_slice(nodes["cpu-worker-01"]) is None
    assert len(full["spec"]["devices"]) == 8 and full["spec"]["pool"]["name"] == "gpu-node-01"
    profiles = [d["attributes"]["profile"]["string"] for d in mig["spec"]["devices"]]
    assert profiles.count("4g.40gb") == 8 and profiles.count("1g.10gb") == 24
