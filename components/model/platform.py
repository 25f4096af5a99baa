"""``gpuaas:platform``: an on-prem cluster (node groups, nodes, fabric) or AKS (GPU pools), by ``kind``."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
)

from components.model import versions
from components.model.base import Model
from components.model.catalog import ND_SKUS
from components.model.fabric import Fabric, Multus
from components.model.sharing import GpuSharing
from components.model.types import (
    AksPoolName,
    AzureLocation,
    AzureResourceGroupName,
    AzureSubscriptionId,
    AzureVmSize,
    DnsLabel,
    DnsSubdomain,
    HcaName,
    KubeconfigContext,
    KubernetesVersion,
    LabelKey,
    LabelValue,
    NonNegativeInt,
    PositiveInt,
    Taint,
)

# --------------------------------------------------------------------------------------------
# On-prem platform


def _some_hcas(hcas: list[str]) -> list[str]:
    if not hcas:
        raise ValueError(
            "is empty; a node group needs at least one InfiniBand HCA (its VFs, GUIDs and RDMA devices come "
            "from them), e.g. [mlx5_0]"
        )
    return hcas


class NodeGroup(GpuSharing):
    """Nodes with the same hardware and the same GPU sharing; the unit MIG/time-slicing apply to."""

    name: DnsLabel
    """Name of the node group (a DNS label, unique in ``nodeGroups``); nodes join it by ``nodes[].nodeGroup`` and it
    names the group's device-plugin config."""
    gpu_model: str
    """GPU model of every node in the group, one of the catalog's (components/model/catalog.py ``GPU_MODELS``, e.g.
    ``H100-80GB``); it decides which MIG profiles fit, and showback prices are looked up by it."""
    gpus_per_node: PositiveInt = 8
    """GPUs in each node of the group (default 8); capacity, quotas and the GPU-count alerts are computed from
    it."""
    hcas: Annotated[list[HcaName], AfterValidator(_some_hcas)] = Field(
        default_factory=lambda: [f"mlx5_{i}" for i in range(8)]
    )
    """RDMA device names of the InfiniBand HCAs (``ibv_devices``); their order fixes HCA indices in GUIDs."""


class Node(Model):
    """An existing Kubernetes node. ``id`` feeds the GUID scheme, so it never changes once set."""

    name: DnsSubdomain
    """The Kubernetes node's name (``kubectl get nodes``), unique in ``nodes``."""
    id: NonNegativeInt
    """Unique number of the node in the GUID scheme: it seeds its VF GUIDs, so it never changes once set and must
    fit ``fabric.guidScheme.nodeBits``."""
    node_group: DnsLabel
    """Name of the node group (``nodeGroups[].name``) the node belongs to: its hardware and GPU sharing."""


class OnPremPlatform(Model):
    """An existing bare-metal cluster with ConnectX HCAs, SR-IOV VFs and OpenSM."""

    kind: Literal["onprem"]
    """``onprem``: an existing bare-metal cluster (selects this form of ``gpuaas:platform``)."""
    kubeconfig_context: KubeconfigContext | None = None
    """kubeconfig context to deploy to; ``None`` uses the ambient kubeconfig's current context."""
    kubernetes_version: str | None = None
    """The cluster's Kubernetes version (``kubectl version``, e.g. ``1.37.2``), declared because
    gpuaas does not create this cluster. Required: checked against the support dates
    (components/model/kubernetes.py) and what moves with the minor (components/rules/versions.py).
    Optional in the model only so that every other problem is still reported when it is missing."""
    node_groups: list[NodeGroup]
    """The node groups: nodes of the same hardware and GPU sharing."""
    nodes: list[Node]
    """Every GPU node gpuaas manages, with its GUID-scheme id and node group."""
    fabric: Fabric = Fabric()
    """The InfiniBand fabric: VFs per HCA, link rate, GUID scheme, infrastructure partition and OpenSM (defaults:
    :class:`Fabric`'s)."""
    multus: Multus | None = None
    """Required once a team has a P_Key partition (its NAD goes through Multus)."""

    @cached_property
    def groups_by_name(self) -> dict[str, NodeGroup]:
        return {g.name: g for g in self.node_groups}


# --------------------------------------------------------------------------------------------
# AKS platform


class ResourceGroup(Model):
    name: AzureResourceGroupName
    """Name of the Azure resource group of the cluster."""
    create: bool = True
    """``False``: the group exists and is only referenced."""


class SystemPool(Model):
    """The small inline System pool of the ManagedCluster (the API cannot update it in place)."""

    name: AksPoolName = "system"
    """Name of the AKS System pool (default ``system``)."""
    vm_size: AzureVmSize = "Standard_D8ds_v5"
    """Azure VM size of the System pool's nodes (default ``Standard_D8ds_v5``)."""
    os_sku: Literal["Ubuntu2204", "Ubuntu2404"] = "Ubuntu2204"
    """One OS SKU for the whole cluster; ``Ubuntu2204`` runs up to Kubernetes 1.36 (components/rules/versions.py)."""
    min_count: int = 1
    """Fewest System pool nodes the cluster autoscaler keeps: at least 1 (the System pool cannot scale to zero) and
    at most ``maxCount`` (default 1)."""
    max_count: PositiveInt = 3
    """Most System pool nodes the cluster autoscaler adds (default 3)."""


class GpuPool(GpuSharing):
    """An ND InfiniBand GPU pool: its own AgentPool, and on Azure its own IB partition."""

    name: AksPoolName
    """Name of the AKS agent pool (unique in ``gpuPools``); teams' ``partition.nodePool`` names it."""
    vm_size: str = "Standard_ND96isr_H100_v5"
    """Azure VM size of the pool: an ND size with InfiniBand (an RDMA ``r`` size, components/model/catalog.py
    ``ND_SKUS``); the pool's GPU model and count follow from it."""
    os_sku: Literal["Ubuntu2204", "Ubuntu2404"] = "Ubuntu2204"
    """Pinned because NVIDIA's DOCA and driver images are built per OS release. ``Ubuntu2204`` runs
    up to Kubernetes 1.36, ``Ubuntu2404`` from 1.32 to 1.38; every pool runs the same one
    (components/rules/versions.py; README, "Upgrading Kubernetes")."""
    min_count: NonNegativeInt = 0
    """Fewest nodes the cluster autoscaler keeps (default 0: the pool scales from zero, through the autoscaler's
    node-template tags). Also the pool's ``count`` at creation (Azure requires one); it is not updated later."""
    max_count: PositiveInt = 2
    """Most nodes the cluster autoscaler adds (default 2); the pool's GPU capacity, which quotas are checked
    against, is counted at this size."""
    taints: list[Taint] = Field(default_factory=lambda: ["nvidia.com/gpu=present:NoSchedule"])
    """Taints of the pool's nodes (``key=value:Effect``; default ``nvidia.com/gpu=present:NoSchedule``); the pods
    of the teams on the pool get tolerations for them (components/tenancy/networks.py)."""
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Extra Kubernetes labels of the pool's nodes; gpuaas's own labels (node group, MIG and device-plugin config)
    are added over them and their keys are refused here."""

    @cached_property
    def gpu_model(self) -> str:
        sku = ND_SKUS.get(self.vm_size)
        return sku.gpu_model if sku else ""


class AksPlatform(Model):
    """Azure AKS with ND-series InfiniBand GPU pools (pulumi-azure-native v3)."""

    kind: Literal["aks"]
    """``aks``: Azure Kubernetes Service (selects this form of ``gpuaas:platform``)."""
    subscription_id: AzureSubscriptionId
    """Azure subscription ID (a GUID) of the cluster."""
    location: AzureLocation
    """Must agree with ``azure-native:location`` where the stack sets it (components/loader.py parse_stack)."""
    resource_group: ResourceGroup
    """The cluster's resource group: its name and whether gpuaas creates it."""
    cluster_name: DnsLabel
    """Name of the AKS managed cluster (a DNS label)."""
    kubernetes_version: KubernetesVersion = versions.AKS_KUBERNETES
    """Kubernetes version of the cluster and its pools (default pinned in components/model/versions.py
    ``AKS_KUBERNETES``); checked against the support dates and the pools' OS SKU."""
    existing_cluster: bool = False
    """Use an existing cluster (``clusterName`` in ``resourceGroup``, which must then have
    ``create: false``) instead of creating one: nothing in Azure is created or changed, only
    its user credentials are read; ``gpuPools`` then describe the pools it already has."""
    register_infiniband_feature: bool = False
    """Register the ``AKSInfinibandSupport`` preview feature (a pool's VMs on one IB network).
    Subscription-wide: it applies to every AKS cluster in the subscription and is kept when the
    stack is destroyed. Asynchronous: Azure returns while it is still ``Registering``; pools
    created before ``Registered`` get no IB placement, so register once out of band or rerun
    ``pulumi up`` once ``az feature show`` reports ``Registered``."""
    system_pool: SystemPool = SystemPool()
    """The inline System pool of the managed cluster (defaults: :class:`SystemPool`'s)."""
    gpu_pools: list[GpuPool]
    """The ND InfiniBand GPU pools, each its own agent pool; with ``existingCluster`` they describe the pools the
    cluster already has."""

    @cached_property
    def pools_by_name(self) -> dict[str, GpuPool]:
        return {p.name: p for p in self.gpu_pools}


Platform = Annotated[OnPremPlatform | AksPlatform, Field(discriminator="kind")]
