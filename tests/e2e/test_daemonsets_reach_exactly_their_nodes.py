"""Every node agent of the platform runs on exactly the nodes it is meant for, and nowhere else.

On each stack's simulated fleet (KWOK nodes from tests/e2e/fleet_nodes.py, the real kube-scheduler
and DaemonSet controller) the plan is applied; then, per DaemonSet, a table: the nodes the config
means (written here, from what the agent is for) beside the nodes its pods were scheduled to, none
Pending.

The operators' own DaemonSets (device plugins, Multus, the DOCA driver, MIG Manager,
dcgm-exporter) do not exist here: the GPU and Network Operators cannot be built or run offline, and
only they create those DaemonSets. What gpuaas hands them is checked instead, by the same
scheduler: for each operand a stand-in DaemonSet with exactly the scheduling inputs the operator
gives it — the NicClusterPolicy's ``nodeAffinity`` and ``tolerations`` (gpuaas's), the operand's
own node selector (the operator's manifests, cited per operand) and, for the GPU Operator, the
chart's ``daemonsets.tolerations`` (gpu-operator v26.7.0 values.yaml) — must land on exactly the
nodes that operand serves.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any, Final

import pytest
import yaml

from e2e import upstream
from e2e.kube import Kube, Obj
from e2e.plan_apply import planned_objects
from tests.e2e.conftest import PLACEMENT_SUMMARY, StackFleet
from tests.e2e.fleet_nodes import (
    AKS_ACCELERATOR,
    AKS_ACCELERATOR_UNCONFIRMED,
    DEVICE_PLUGIN_CONFIG,
    MIG_CONFIG,
    MOFED_WAIT,
    NodeSpec,
)
from tests.e2e.jobs import PAUSE

STACKS: Final = ("onprem", "aks")
STANDIN_NS: Final = "e2e-operator-standins"


def stack_fleet(request: pytest.FixtureRequest, stack: str) -> StackFleet:
    sf: StackFleet = request.getfixturevalue(f"{stack}_fleet")
    return sf


def rdma_nodes(sf: StackFleet) -> set[str]:
    """Nodes with InfiniBand HCAs: every configured on-prem node (a node group has at least one
    HCA), every node of an AKS ND pool; never the plain worker or the AKS system pool."""
    return {s.name for s in sf.specs if s.mellanox}


def gpu_nodes(sf: StackFleet) -> set[str]:
    return {s.name for s in sf.specs if s.gpus}


#: The nodes each of gpuaas's DaemonSets is for, and why.
INTENDED: Final = {
    # loads ib_umad/ib_ipoib and writes the IPoIB and RDMA drop-ins on every InfiniBand node
    "ib-node-config": rdma_nodes,
    # creates the VFs and sets their P_Keys and GUIDs on every HCA (on-prem)
    "gpuaas-vf-config": rdma_nodes,
    # installs the ib-sriov CNI binary every VF attachment needs (on-prem)
    "ib-sriov-cni": rdma_nodes,
    # keeps the token of Multus' kubeconfig fresh wherever Multus runs (the NicClusterPolicy's nodes)
    "gpuaas-multus-kubeconfig": rdma_nodes,
    # the RDMA shared device plugin (AKS, standalone): every ND node's HCAs
    "rdma-shared-dp-ds": rdma_nodes,
}


def _table(name: str, expected: set[str], scheduled: dict[str, str], why: str = "") -> str:
    rows = [f"DaemonSet {name}" + (f" ({why})" if why else ""), f"  {'node':<34} {'expected (config)':<18} scheduled"]
    for node in sorted(expected | set(scheduled)):
        got = scheduled.get(node)
        rows.append(f"  {node or '(not bound)':<34} {'yes' if node in expected else '-':<18} {got or '-'}")
    return "\n".join(rows)


def _daemonsets(kube: Kube, namespace: str | None = None) -> list[Obj]:
    return [d for d in kube.list("apps/v1", "DaemonSet", namespace)]


def _settled(kube: Kube, ds: Obj) -> bool:
    got = kube.get("apps/v1", "DaemonSet", ds["metadata"]["name"], ds["metadata"]["namespace"]) or {}
    st = got.get("status", {})
    return bool(
        st.get("observedGeneration") == got["metadata"].get("generation")
        and st.get("desiredNumberScheduled", -1) == st.get("numberReady")
        and st.get("currentNumberScheduled") == st.get("desiredNumberScheduled")
    )


def _scheduled(sf: StackFleet, ds: Obj) -> dict[str, str]:
    return sf.fleet.daemonset_nodes(ds["metadata"]["namespace"], ds["metadata"]["name"])


def _check(config: pytest.Config, sf: StackFleet, name: str, ns: str, expected: set[str], why: str = "") -> None:
    kube = sf.kube
    ds = kube.get("apps/v1", "DaemonSet", name, ns)
    assert ds is not None, f"DaemonSet {ns}/{name} is not there"
    with contextlib.suppress(TimeoutError):  # the table says what is wrong
        kube.wait_for(
            f"{ns}/{name}: pods on exactly its nodes, Running",
            lambda: _settled(kube, ds) and set(_scheduled(sf, ds)) == expected and _scheduled(sf, ds),
            timeout=120,
        )
    scheduled = _scheduled(sf, ds)
    table = _table(f"{ns}/{name}", expected, scheduled, why)
    running = sorted(n for n, phase in scheduled.items() if phase == "Running")
    PLACEMENT_SUMMARY.append(
        f"{sf.run.stack:<7} DaemonSet {ns}/{name}: expected {len(expected)}, scheduled {len(scheduled)}, "
        f"running {len(running)}, elsewhere {len(set(scheduled) - expected)}"
    )
    del config
    assert set(scheduled) == expected, table
    assert all(phase == "Running" for phase in scheduled.values()), table
    assert expected, f"{name}: the config means it for no node at all\n{table}"


# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_the_nodes_carry_the_labels_the_plan_puts_there(request: pytest.FixtureRequest, stack: str) -> None:
    """On-prem the plan's NodePatches add exactly gpuaas's labels; on AKS the pools' ``nodeLabels``
    and ``nodeTaints`` sent to Azure are the labels and taints the fleet's nodes carry."""
    sf = stack_fleet(request, stack)
    nodes = {n["metadata"]["name"]: n for n in sf.kube.list("v1", "Node")}
    for spec in sf.specs:
        labels = nodes[spec.name]["metadata"].get("labels", {})
        missing = {k: v for k, v in spec.labels_after_plan.items() if labels.get(k) != v}
        assert not missing, f"{spec.name}: {missing} (has {labels})"
    if stack == "onprem":
        patched = {p.obj["metadata"]["name"]: p.obj for p in planned_objects(sf.run) if p.obj["kind"] == "Node"}
        for spec in sf.specs:
            want = dict(spec.ours)
            got = patched.get(spec.name, {}).get("metadata", {}).get("labels", {})
            assert got == want, (spec.name, got, want)
        return
    pools = {r.inputs["agentPoolName"]: r.inputs for r in sf.run.of_type("azure-native:containerservice:AgentPool")}
    for spec in sf.specs:
        if spec.group not in pools:
            continue  # the System pool (inline in the ManagedCluster)
        pool = pools[spec.group]
        assert pool["vmSize"] == spec.labels["node.kubernetes.io/instance-type"]
        node_labels = pool.get("nodeLabels") or {}
        assert {k: spec.labels[k] for k in node_labels} == node_labels, (spec.name, node_labels)
        assert set(spec.ours) <= set(node_labels), (spec.name, spec.ours, node_labels)
        taints = sorted(f"{t['key']}{'=' + t['value'] if 'value' in t else ''}:{t['effect']}" for t in spec.taints)
        assert sorted(pool.get("nodeTaints") or []) == taints, (spec.name, pool.get("nodeTaints"))


@pytest.mark.parametrize("stack", STACKS)
def test_every_platform_daemonset_runs_on_exactly_its_nodes(
    request: pytest.FixtureRequest, pytestconfig: pytest.Config, stack: str
) -> None:
    sf = stack_fleet(request, stack)
    planned = [p.obj for p in planned_objects(sf.run) if p.obj["kind"] == "DaemonSet"]
    assert planned, "the plan has no DaemonSet"
    unknown = sorted(d["metadata"]["name"] for d in planned if d["metadata"]["name"] not in INTENDED)
    assert not unknown, f"DaemonSets with no intended nodes written in INTENDED: {unknown}"
    for ds in planned:
        name, ns = ds["metadata"]["name"], ds["metadata"]["namespace"]
        _check(pytestconfig, sf, name, ns, INTENDED[name](sf))


# --------------------------------------------------------------------------------------------
# the operators' DaemonSets: stand-ins with the scheduling inputs the operators would give them


def _gpu_operator_tolerations() -> list[dict[str, Any]]:
    values = yaml.safe_load(upstream.require("gpu-operator/v26.7.0/values.yaml").read_text())
    tolerations: list[dict[str, Any]] = values["daemonsets"]["tolerations"]
    return tolerations


def _planned(sf: StackFleet, kind: str, name: str) -> Obj | None:
    return next(
        (p.obj for p in planned_objects(sf.run) if p.obj["kind"] == kind and p.obj["metadata"]["name"] == name), None
    )


def _gpu_operator_values(sf: StackFleet) -> dict[str, Any]:
    rel = next(r for r in sf.run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("name") == "gpu-operator")
    values: dict[str, Any] = rel.inputs.get("values") or {}
    return values


def operands(sf: StackFleet) -> list[tuple[str, dict[str, Any], set[str], str]]:
    """(operand, pod scheduling spec, nodes it serves, source) for each operand the operators deploy."""
    out: list[tuple[str, dict[str, Any], set[str], str]] = []
    ncp = _planned(sf, "NicClusterPolicy", "nic-cluster-policy")
    assert ncp is not None, "the plan has no NicClusterPolicy"
    spec = ncp["spec"]
    base = {"affinity": {"nodeAffinity": spec["nodeAffinity"]}, "tolerations": spec.get("tolerations", [])}
    net_src = "network-operator v26.4.1 manifests/state-*: NicClusterPolicy nodeAffinity and tolerations"
    wait = {"nodeSelector": {MOFED_WAIT: "false"}}
    if "ofedDriver" in spec:
        # manifests/state-ofed-driver/0050_ofed-driver-ds.yaml: nodeSelector pci-15b3.present
        out.append(("doca-driver", {**base, "nodeSelector": {"feature.node.kubernetes.io/pci-15b3.present": "true"}},
                    rdma_nodes(sf), net_src))  # fmt: skip
    if "secondaryNetwork" in spec:
        out.append(("multus", {**base, **wait}, rdma_nodes(sf), net_src + "; state-multus-cni: mofed.wait=false"))
        out.append(("cni-plugins", {**base, **wait}, rdma_nodes(sf), net_src + "; state-container-networking-plugins"))
    if "sriovDevicePlugin" in spec:
        src = net_src + "; 0030-sriov-dp-daemonset.yaml"
        out.append(("sriov-device-plugin", {**base, **wait}, rdma_nodes(sf), src))
    if "rdmaSharedDevicePlugin" in spec:
        out.append(("rdma-shared-device-plugin", {**base, **wait}, rdma_nodes(sf), net_src))
    values = _gpu_operator_values(sf)
    tolerations = values.get("daemonsets", {}).get("tolerations") or _gpu_operator_tolerations()
    gpu_src = "gpu-operator v26.7.0: nodeSelector nvidia.com/gpu.deploy.<operand>=true, chart daemonsets.tolerations"
    for operand in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "container-toolkit",
                    "operator-validator", "mig-manager"):  # fmt: skip
        if operand == "mig-manager" and values.get("migManager", {}).get("enabled") is False:
            continue
        sel = {"nodeSelector": {f"nvidia.com/gpu.deploy.{operand}": "true"}, "tolerations": tolerations}
        out.append((operand, sel, gpu_nodes(sf), gpu_src))
    return out


def _standin(name: str, scheduling: dict[str, Any]) -> Obj:
    labels = {"e2e.gpuaas.io/standin": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": STANDIN_NS},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": PAUSE}], **scheduling},
            },
        },
    }


@pytest.mark.parametrize("stack", STACKS)
def test_the_selectors_handed_to_the_operators_reach_exactly_their_nodes(
    request: pytest.FixtureRequest, pytestconfig: pytest.Config, stack: str
) -> None:
    sf = stack_fleet(request, stack)
    kube = sf.kube
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STANDIN_NS}})
    found = operands(sf)
    names = {name for name, *_ in found}
    assert {"device-plugin", "dcgm-exporter"} <= names, names
    # on-prem the NicClusterPolicy deploys Multus and the SR-IOV device plugin; on AKS the DOCA driver
    assert {"multus", "sriov-device-plugin"} <= names if stack == "onprem" else "doca-driver" in names, names
    if stack == "aks":
        PLACEMENT_SUMMARY.append(f"aks     note: {AKS_ACCELERATOR_UNCONFIRMED}")
    try:
        for name, scheduling, _expected, _src in found:
            kube.apply(_standin(name, scheduling))
        for name, _scheduling, expected, src in found:
            _check(pytestconfig, sf, name, STANDIN_NS, expected, f"stand-in: {src}")
    finally:
        kube.delete("v1", "Namespace", STANDIN_NS)


@pytest.mark.parametrize("stack", STACKS)
def test_the_configs_handed_to_the_operators_name_every_nodes_labels(
    request: pytest.FixtureRequest, stack: str
) -> None:
    """The device plugin and MIG Manager take a node's config by its label: the ConfigMaps gpuaas
    hands the GPU Operator have a key for each node's; the SR-IOV device plugin's resources are the
    ones the nodes advertise (README: a partition's resource is ``nvidia.com/sriov<P_Key>``)."""
    sf = stack_fleet(request, stack)
    values = _gpu_operator_values(sf)
    plugin_cm = _planned(sf, "ConfigMap", values["devicePlugin"]["config"]["name"])
    mig_cm = _planned(sf, "ConfigMap", values["migManager"]["config"]["name"])
    assert plugin_cm is not None and mig_cm is not None
    mig_configs = yaml.safe_load(mig_cm["data"]["config.yaml"])["mig-configs"]
    for spec in sf.specs:
        if not spec.gpus:
            continue
        labels = spec.labels_after_plan
        assert labels[DEVICE_PLUGIN_CONFIG] in plugin_cm["data"], (spec.name, sorted(plugin_cm["data"]))
        assert labels[MIG_CONFIG] in mig_configs, (spec.name, sorted(mig_configs))
        # the mig-parted config the node is labelled with makes the MIG devices the node advertises
        want = {p: n for p, n in spec.mig.items()}
        entry = mig_configs[labels[MIG_CONFIG]][0]
        assert (entry.get("mig-devices") or {}) == want, (spec.name, entry)
    ncp = _planned(sf, "NicClusterPolicy", "nic-cluster-policy") or {}
    sriov = ncp.get("spec", {}).get("sriovDevicePlugin")
    if sriov is not None:
        names = {f"{r['resourcePrefix']}/{r['resourceName']}" for r in json.loads(sriov["config"])["resourceList"]}
        for spec in _rdma_specs(sf.specs):
            advertised = {r for r in spec.capacity if "/sriov" in r}
            assert names == advertised, (spec.name, sorted(names), sorted(advertised))
    if stack == "aks":
        accelerated = all(s.labels.get(AKS_ACCELERATOR) == "nvidia" for s in _rdma_specs(sf.specs))
        assert accelerated, AKS_ACCELERATOR_UNCONFIRMED


def _rdma_specs(specs: Sequence[NodeSpec]) -> list[NodeSpec]:
    return [s for s in specs if s.mellanox]
