"""The simulated fleet's nodes: what a real node of each stack carries, from upstream documentation.

This is the suite's oracle of a node, written from the documentation of the programs that put
each label, taint and resource on a real node, and **not** from ``components/``: the only thing read
from gpuaas is the parsed stack config (which nodes, groups, pools, HCAs, partitions and sharing a
stack declares). Where gpuaas itself labels a node (on-prem ``NodePatch``, AKS pool ``nodeLabels``),
the labels are written here from the README's promise ("Components, in install order": the node
group, MIG config and device-plugin config labels), so the e2e tests can check that the plan puts
exactly them there.

A node is a :class:`NodeSpec`; :meth:`NodeSpec.manifest` is the KWOK Node the fleet creates
(e2e/fleet.py). On-prem, the node is created as the cluster has it *before* gpuaas ran (kubelet,
NFD, the GPU and Network Operators' labels); ``ours`` are the labels the plan's NodePatches add. On
AKS, AKS puts the pool's ``nodeLabels`` on every node it adds, so ``ours`` are on the node from the
start.

One piece (over 400 lines): the node model is one oracle, and its sources belong beside it.

Sources (each fact below cites one):

- kubelet: the well-known labels ``kubernetes.io/hostname``, ``kubernetes.io/os``,
  ``kubernetes.io/arch`` (kubernetes.io/docs/reference/labels-annotations-taints) and ``maxPods``
  110 (kubelet configuration reference, ``maxPods`` default).
- NFD: the Network Operator chart deploys NFD (gpuaas sets ``nfd.enabled: true`` there and
  ``nfd.enabled: false`` in the GPU Operator's values). Its worker config
  (network-operator v26.4.1 values.yaml ``node-feature-discovery.worker.config.sources.pci``:
  ``deviceClassWhitelist: ["0300", "0302"]``, ``deviceLabelFields: [vendor]``) labels a node with
  an NVIDIA GPU (PCI class 0302, vendor 10de) ``feature.node.kubernetes.io/pci-10de.present=true``.
  ConnectX HCAs (class 0207) are not in that list: the chart's NodeFeatureRule
  (templates/nodefeaturerules.yaml, ``nvidia-nics-rules``: vendor 15b3, class 0200/0207) or, where
  a stack turns it off (the AKS guide), gpuaas's own rule, gives
  ``feature.node.kubernetes.io/pci-15b3.present=true`` (NFD prefixes rule labels with
  ``feature.node.kubernetes.io/``, NFD docs "Feature labels").
- GPU Operator: ``nvidia.com/gpu.present=true`` and the operand deploy labels it puts on every GPU
  node (gpu-operator controllers/state_manager.go ``gpuStateLabels``: driver,
  gpu-feature-discovery, container-toolkit, device-plugin, dcgm, dcgm-exporter,
  node-status-exporter, operator-validator), ``nvidia.com/gpu.deploy.mig-manager=true`` on
  MIG-capable GPUs (same file); gpu-feature-discovery's ``nvidia.com/gpu.product``,
  ``nvidia.com/gpu.count``, ``nvidia.com/mig.strategy``, ``nvidia.com/mig.capable``,
  ``nvidia.com/gpu.replicas`` and ``nvidia.com/gpu.sharing-strategy`` (k8s-device-plugin README,
  "Shared Access to GPUs" and the GFD label list).
- Device plugin (NVIDIA/k8s-device-plugin README): a whole GPU is ``nvidia.com/gpu``; MIG with the
  ``mixed`` strategy advertises ``nvidia.com/mig-<profile>`` per MIG device and no
  ``nvidia.com/gpu`` for a GPU in MIG mode; ``single`` advertises every MIG device as
  ``nvidia.com/gpu``; time-slicing with ``renameByDefault: true`` advertises ``replicas`` shares of
  each GPU as ``nvidia.com/gpu.shared`` (and no ``nvidia.com/gpu``). The MIG devices of a named
  layout are mig-parted's: the GPU Operator's default config
  (gpu-operator v26.7.0 assets/state-mig-manager/0400_configmap.yaml, read from
  ../shared/upstream) for ``all-*`` names, by the GPU's PCI device id.
- Network Operator: ``network.nvidia.com/operator.mofed.wait=false`` once the node's DOCA driver
  is ready, and on every Mellanox node when the driver is on the host (network-operator
  controllers/nicclusterpolicy_controller.go ``handleMOFEDWaitLabels``).
- SR-IOV device plugin (sriov-network-device-plugin v3.11.0 README, ``resourceList`` selectors):
  one resource per selector; gpuaas's VF script gives VF ``i`` of every HCA the P_Key of the
  partition bound to VF index ``i``, and the selector is that P_Key, so each partition's resource
  holds one VF per HCA of the node: ``nvidia.com/sriov<full P_Key, 4 hex digits>`` (README,
  "Teams": the partition's RDMA resource).
- RDMA shared device plugin (k8s-rdma-shared-dev-plugin v1.5.3 README): a resource
  ``<resourcePrefix>/<resourceName>`` with ``rdmaHcaMax`` devices on each node whose HCAs match.
- AKS (MicrosoftDocs azure-docs articles/aks/reserved-labels-reference.md, "Reserved system
  labels"): ``kubernetes.azure.com/agentpool=<pool>``, ``node.kubernetes.io/instance-type=<VM
  size>``, ``topology.kubernetes.io/region``, ``topology.kubernetes.io/zone`` (``0``, a fault
  domain, for a pool without availability zones: the table's example), ``kubernetes.azure.com/mode``
  (``system``/``user``), ``kubernetes.azure.com/role=agent``, ``kubernetes.azure.com/os-sku``;
  "Use labels in an AKS cluster" and "Use taints": a pool's ``nodeLabels`` and ``nodeTaints`` are
  on every node of the pool. ``kubernetes.azure.com/accelerator=nvidia`` is in the same table (value
  example ``nvidia``) but the page does not say which VM sizes get it, nor whether a pool with
  ``gpuProfile.driver: None`` keeps it; Microsoft's Azure/aks-rdma-infiniband selects ND nodes by it
  (configs/nvidia-peermem-reloader/ds.yaml). **Not confirmed**: the fleet puts it on ND nodes because
  that guide relies on it, and :data:`AKS_ACCELERATOR_UNCONFIRMED` says so where it is used.
- VM sizes (Microsoft Learn, ND H100 v5 / ND H200 v5 / ND A100 v4 series; Dds v5 series): vCPUs,
  memory and GPUs per VM. On-prem nodes: an NVIDIA DGX H100 (DGX H100 user guide, "Hardware
  overview": 2 × 56-core Xeon 8480C with hyper-threading, 2 TB memory).
- DRA: the NVIDIA DRA driver ``gpu.nvidia.com`` publishes one ResourceSlice per node, pool = node
  name, a device per GPU (attribute ``type: gpu``) or per MIG device (``type: mig``, ``profile``)
  (dra-driver-nvidia-gpu docs reference/resourceslice-attributes.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

import yaml

from components.model.config import StackConfig
from components.model.teams import OnPremPartition
from e2e import upstream
from e2e.kwok_nodes import kwok_node

Obj = dict[str, Any]

#: mig-parted's default configs as the GPU Operator ships them (read through e2e/upstream.py: checked upstream bytes).
MIG_PARTED_DEFAULTS: Final = "gpu-operator/v26.7.0/assets/state-mig-manager/0400_configmap.yaml"

HOSTNAME: Final = "kubernetes.io/hostname"
NVIDIA_PCI: Final = "feature.node.kubernetes.io/pci-10de.present"
MELLANOX_PCI: Final = "feature.node.kubernetes.io/pci-15b3.present"
MOFED_WAIT: Final = "network.nvidia.com/operator.mofed.wait"
GPU_PRESENT: Final = "nvidia.com/gpu.present"
AKS_POOL: Final = "kubernetes.azure.com/agentpool"
AKS_ACCELERATOR: Final = "kubernetes.azure.com/accelerator"
#: Why the fleet puts ``kubernetes.azure.com/accelerator=nvidia`` on ND nodes (see the docstring).
AKS_ACCELERATOR_UNCONFIRMED: Final = (
    "kubernetes.azure.com/accelerator is an AKS reserved label (reserved-labels-reference.md, example 'nvidia'); "
    "which VM sizes get it, and whether gpuProfile.driver None keeps it, is not documented: assumed on ND pools "
    "as Azure/aks-rdma-infiniband assumes it"
)
#: gpuaas's own node labels (README "Components, in install order": node group, MIG layout, device-plugin config).
NODE_GROUP: Final = "gpuaas.io/node-group"
MIG_CONFIG: Final = "nvidia.com/mig.config"
DEVICE_PLUGIN_CONFIG: Final = "nvidia.com/device-plugin.config"

GPU: Final = "nvidia.com/gpu"
GPU_SHARED: Final = "nvidia.com/gpu.shared"

#: The operand deploy labels the GPU Operator sets on every GPU node (state_manager.go gpuStateLabels).
GPU_OPERATOR_DEPLOY: Final = tuple(
    f"nvidia.com/gpu.deploy.{operand}"
    for operand in (
        "driver",
        "gpu-feature-discovery",
        "container-toolkit",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "node-status-exporter",
        "operator-validator",
    )
)


@dataclass(frozen=True)
class GpuFacts:
    """What GFD reports for a GPU model, and its PCI device id (mig-parted's device-filter)."""

    product: str
    pci_device: str
    mig_capable: bool = True


#: GFD's ``nvidia.com/gpu.product`` (the NVML name, spaces as ``-``) and the PCI device ids of the
#: SXM parts, as mig-parted's default config names them in its device filters (0400_configmap.yaml
#: comments: "H100-80GB", "A100-80GB", "H200 141GB", ...).
GPU_FACTS: Final[dict[str, GpuFacts]] = {
    "H100-80GB": GpuFacts("NVIDIA-H100-80GB-HBM3", "0x233010DE"),
    "A100-80GB": GpuFacts("NVIDIA-A100-SXM4-80GB", "0x20B210DE"),
    "A100-40GB": GpuFacts("NVIDIA-A100-SXM4-40GB", "0x20B010DE"),
    "H200-141GB": GpuFacts("NVIDIA-H200", "0x233510DE"),
}


@dataclass(frozen=True)
class Machine:
    cpu: int
    memory: str
    gpus: int
    gpu_model: str | None


#: Azure VM sizes (Microsoft Learn size pages): vCPUs, memory, GPUs.
AZURE_SIZES: Final[dict[str, Machine]] = {
    "Standard_ND96isr_H100_v5": Machine(96, "1900Gi", 8, "H100-80GB"),
    "Standard_ND96isr_H200_v5": Machine(96, "1850Gi", 8, "H200-141GB"),
    "Standard_ND96amsr_A100_v4": Machine(96, "1900Gi", 8, "A100-80GB"),
    "Standard_ND96asr_v4": Machine(96, "900Gi", 8, "A100-40GB"),
    "Standard_D8ds_v5": Machine(8, "32Gi", 0, None),
    "Standard_D4ds_v5": Machine(4, "16Gi", 0, None),
    "Standard_D16ds_v5": Machine(16, "64Gi", 0, None),
}
#: An on-prem GPU node: a DGX H100 (224 hardware threads, 2 TB).
DGX_CPU: Final = 224
DGX_MEMORY: Final = "2Ti"
#: The plain worker an existing on-prem cluster has besides its GPU nodes (operators' Deployments run there).
ONPREM_WORKER: Final = "cpu-worker-01"
KUBELET_MAX_PODS: Final = 110


@dataclass(frozen=True)
class NodeSpec:
    """One node of the fleet: labels as it registers, gpuaas's labels, taints and resources."""

    name: str
    #: The node group (on-prem) or pool (AKS) it belongs to; ``""`` for the on-prem plain worker.
    group: str
    labels: Mapping[str, str]
    #: gpuaas's labels (on-prem: added by the plan's NodePatch; AKS: already in ``labels``).
    ours: Mapping[str, str]
    taints: Sequence[Mapping[str, str]] = ()
    capacity: Mapping[str, str] = field(default_factory=dict)
    #: MIG devices per GPU (profile -> count), empty without MIG.
    mig: Mapping[str, int] = field(default_factory=dict)
    gpus: int = 0
    mellanox: bool = False

    @property
    def labels_after_plan(self) -> dict[str, str]:
        return {**self.labels, **self.ours}

    def manifest(self) -> Obj:
        """The KWOK Node (e2e.kwok_nodes.kwok_node): as it registers, before any plan."""
        return kwok_node(
            self.name, labels=dict(self.labels), taints=[dict(t) for t in self.taints], capacity=dict(self.capacity)
        )


# --------------------------------------------------------------------------------------------
# MIG layouts

_TERM = re.compile(r"(\d+)x(.+)")


@cache
def _mig_parted_defaults() -> dict[str, Any]:
    doc = yaml.safe_load(upstream.require(MIG_PARTED_DEFAULTS).read_text())
    configs: dict[str, Any] = yaml.safe_load(doc["data"]["config.yaml"])["mig-configs"]
    return configs


def mig_devices(layout: str | None, profiles: Mapping[str, int] | None, gpu_model: str) -> dict[str, int]:
    """MIG devices per GPU for a group's ``mig`` config (README: ``layout`` or ``profiles``).

    ``<n>x<profile>`` terms joined by ``-`` are read as written; ``all-*`` names are mig-parted's
    default configs, the entry whose device filter names this GPU (or has none).
    """
    if profiles:
        return dict(profiles)
    if layout is None or layout == "all-disabled":
        return {}
    if not layout.startswith("all-"):
        out: dict[str, int] = {}
        for term in layout.split("-"):
            m = _TERM.fullmatch(term)
            if m is None:
                raise ValueError(f"layout {layout!r}: term {term!r} is not <n>x<profile>")
            out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
        return out
    device = GPU_FACTS[gpu_model].pci_device
    for entry in _mig_parted_defaults()[layout]:
        flt = entry.get("device-filter")
        ids = [flt] if isinstance(flt, str) else (flt or [])
        if not ids or device.lower() in (i.lower() for i in ids):
            if not entry.get("mig-enabled"):
                return {}
            return {str(k): int(v) for k, v in entry["mig-devices"].items()}
    raise LookupError(f"mig-parted's {layout!r} has no entry for {gpu_model} ({device})")


# --------------------------------------------------------------------------------------------
# Resources


def _gpu_resources(cfg: StackConfig, gpus: int, mig: Mapping[str, int], replicas: int | None) -> dict[str, str]:
    """What the NVIDIA device plugin advertises (README of NVIDIA/k8s-device-plugin)."""
    if mig:
        if cfg.gpu_operator.mig_strategy == "single":
            return {GPU: str(gpus * sum(mig.values()))}
        return {f"nvidia.com/mig-{p}": str(gpus * n) for p, n in sorted(mig.items())}
    if replicas is not None:
        return {GPU_SHARED: str(gpus * replicas)}
    return {GPU: str(gpus)}


def _sriov_resources(cfg: StackConfig, hcas: int) -> dict[str, str]:
    """One VF per HCA for each partition whose VF index the nodes have (fabric.vfsPerHca)."""
    onprem = cfg.onprem
    assert onprem is not None
    out: dict[str, str] = {}
    for team in cfg.teams:
        part = team.partition
        if isinstance(part, OnPremPartition) and part.vf_index < onprem.fabric.vfs_per_hca:
            # The full-member P_Key: the limited-member key with bit 15 set (IBTA vol. 1, 10.9.1.2).
            out[f"nvidia.com/sriov{int(part.pkey) | 0x8000:04x}"] = str(hcas)
    return out


def _rdma_shared(cfg: StackConfig) -> dict[str, str]:
    net = cfg.network
    if net.rdma_shared_device_plugin == "none":
        return {}
    return {f"{net.rdma_resource_prefix}/{net.rdma_resource_name}": str(net.rdma_hca_max)}


def _gfd_labels(cfg: StackConfig, model: str, gpus: int, replicas: int | None) -> dict[str, str]:
    facts = GPU_FACTS[model]
    labels = {
        NVIDIA_PCI: "true",
        GPU_PRESENT: "true",
        **{label: "true" for label in GPU_OPERATOR_DEPLOY},
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.product": facts.product + ("-SHARED" if replicas else ""),
        "nvidia.com/gpu.replicas": str(replicas or 1),
        "nvidia.com/gpu.sharing-strategy": "time-slicing" if replicas else "none",
        "nvidia.com/mig.capable": str(facts.mig_capable).lower(),
        "nvidia.com/mig.strategy": cfg.gpu_operator.mig_strategy,
    }
    if facts.mig_capable:
        labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
    return labels


def _kubelet_capacity(cpu: int, memory: str) -> dict[str, str]:
    return {"cpu": str(cpu), "memory": memory, "pods": str(KUBELET_MAX_PODS), "ephemeral-storage": "1Ti"}


# --------------------------------------------------------------------------------------------
# On-prem


def onprem_nodes(cfg: StackConfig, *, worker: bool = True) -> list[NodeSpec]:
    """Every configured node as its group's hardware and operators label it, and one plain worker."""
    onprem = cfg.onprem
    assert onprem is not None, "not an on-prem stack"
    groups = {g.name: g for g in onprem.node_groups}
    out: list[NodeSpec] = []
    for node in onprem.nodes:
        g = groups[node.node_group]
        replicas = g.time_slicing.replicas if g.time_slicing else None
        mig = mig_devices(g.mig.layout, g.mig.profiles, g.gpu_model)
        labels = {
            **_gfd_labels(cfg, g.gpu_model, g.gpus_per_node, replicas),
            MELLANOX_PCI: "true",
            # DOCA-OFED on the host (network.ofedDriver: host) or its container ready.
            MOFED_WAIT: "false",
        }
        ours = {
            NODE_GROUP: g.name,
            MIG_CONFIG: (g.mig.layout or "all-disabled").replace("+", "."),
            DEVICE_PLUGIN_CONFIG: g.name,
        }
        if g.mig.profiles:
            ours[MIG_CONFIG] = "-".join(f"{n}x{p}" for p, n in sorted(g.mig.profiles.items())).replace("+", ".")
        capacity = {
            **_kubelet_capacity(DGX_CPU, DGX_MEMORY),
            **_gpu_resources(cfg, g.gpus_per_node, mig, replicas),
            **_sriov_resources(cfg, len(g.hcas)),
            **_rdma_shared(cfg),
        }
        out.append(
            NodeSpec(
                name=node.name,
                group=g.name,
                labels=labels,
                ours=ours,
                capacity=capacity,
                mig=mig,
                gpus=g.gpus_per_node,
                mellanox=True,
            )
        )
    if worker:
        out.append(NodeSpec(name=ONPREM_WORKER, group="", labels={}, ours={}, capacity=_kubelet_capacity(32, "128Gi")))
    return out


# --------------------------------------------------------------------------------------------
# AKS


def _taint(text: str) -> dict[str, str]:
    """An AKS ``nodeTaints`` entry ``key[=value]:Effect`` as a Node's taint."""
    kv, _, effect = text.partition(":")
    key, _, value = kv.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def aks_node_name(pool: str, index: int) -> str:
    """AKS's node names: ``aks-<pool>-<8 digits>-vmss<6 base-36 digits>`` (reserved labels table example)."""
    return f"aks-{pool}-00000000-vmss{index:06d}"


def aks_nodes(cfg: StackConfig, per_pool: Mapping[str, int] | None = None) -> list[NodeSpec]:
    """Nodes for every pool: ``per_pool[pool]`` of them, else the pool's minCount but at least one."""
    aks = cfg.aks
    assert aks is not None, "not an AKS stack"
    per_pool = per_pool or {}
    common = {
        "kubernetes.azure.com/role": "agent",
        "kubernetes.azure.com/cluster": f"MC_{aks.resource_group.name}_{aks.cluster_name}_{aks.location}",
        "topology.kubernetes.io/region": aks.location,
        "topology.kubernetes.io/zone": "0",
    }
    out: list[NodeSpec] = []
    sp = aks.system_pool
    size = AZURE_SIZES[sp.vm_size]
    for i in range(per_pool.get(sp.name, max(sp.min_count, 1))):
        name = aks_node_name(sp.name, i)
        labels = {
            **common,
            AKS_POOL: sp.name,
            "kubernetes.azure.com/mode": "system",
            "kubernetes.azure.com/os-sku": sp.os_sku,
            "node.kubernetes.io/instance-type": sp.vm_size,
        }
        out.append(NodeSpec(name, sp.name, labels, {}, capacity=_kubelet_capacity(size.cpu, size.memory)))
    for pool in aks.gpu_pools:
        size = AZURE_SIZES[pool.vm_size]
        assert size.gpu_model is not None, pool.vm_size
        replicas = pool.time_slicing.replicas if pool.time_slicing else None
        mig = mig_devices(pool.mig.layout, pool.mig.profiles, size.gpu_model)
        ours = {
            NODE_GROUP: pool.name,
            MIG_CONFIG: (pool.mig.layout or "all-disabled").replace("+", "."),
            DEVICE_PLUGIN_CONFIG: pool.name,
        }
        if pool.mig.profiles:
            ours[MIG_CONFIG] = "-".join(f"{n}x{p}" for p, n in sorted(pool.mig.profiles.items())).replace("+", ".")
        for i in range(per_pool.get(pool.name, max(pool.min_count, 1))):
            name = aks_node_name(pool.name, i)
            labels = {
                **common,
                AKS_POOL: pool.name,
                "kubernetes.azure.com/mode": "user",
                "kubernetes.azure.com/os-sku": pool.os_sku,
                "node.kubernetes.io/instance-type": pool.vm_size,
                AKS_ACCELERATOR: "nvidia",  # AKS_ACCELERATOR_UNCONFIRMED
                **_gfd_labels(cfg, size.gpu_model, size.gpus, replicas),
                MELLANOX_PCI: "true",
                # The DOCA driver container is ready (network.ofedDriver: container); a test flips it.
                MOFED_WAIT: "false",
                # The pool's nodeLabels, as AKS puts them on every node of the pool.
                **pool.labels,
                **ours,
            }
            capacity = {
                **_kubelet_capacity(size.cpu, size.memory),
                **_gpu_resources(cfg, size.gpus, mig, replicas),
                **_rdma_shared(cfg),
            }
            out.append(
                NodeSpec(
                    name,
                    pool.name,
                    labels,
                    ours,
                    taints=[_taint(t) for t in pool.taints],
                    capacity=capacity,
                    mig=mig,
                    gpus=size.gpus,
                    mellanox=True,
                )
            )
    return out


def fleet_nodes(cfg: StackConfig, per_pool: Mapping[str, int] | None = None) -> list[NodeSpec]:
    """The stack's fleet: on-prem nodes plus a plain worker, or AKS pools' nodes."""
    return onprem_nodes(cfg) if cfg.onprem is not None else aks_nodes(cfg, per_pool)


# --------------------------------------------------------------------------------------------
# DRA


def resource_slice(spec: NodeSpec) -> Obj | None:
    """The NVIDIA DRA driver's ResourceSlice of a GPU node (``resource.k8s.io/v1``), ``None`` without GPUs."""
    if not spec.gpus:
        return None
    product = spec.labels.get("nvidia.com/gpu.product", "").removesuffix("-SHARED")
    devices: list[Obj] = []
    for gpu in range(spec.gpus):
        if not spec.mig:
            attrs = {"type": {"string": "gpu"}, "index": {"int": gpu}, "productName": {"string": product}}
            devices.append({"name": f"gpu-{gpu}", "attributes": attrs})
            continue
        for profile, count in sorted(spec.mig.items()):
            for j in range(count):
                attrs = {"type": {"string": "mig"}, "profile": {"string": profile}, "parentIndex": {"int": gpu}}
                name = f"gpu-{gpu}-mig-{profile.replace('.', '').replace('+', '')}-{j}"
                devices.append({"name": name, "attributes": attrs})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{spec.name}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": spec.name,
            "pool": {"name": spec.name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def by_name(nodes: Sequence[NodeSpec]) -> dict[str, NodeSpec]:
    return {n.name: n for n in nodes}
