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
    gpu_model: str
    gpus_per_node: PositiveInt = 8
    hcas: Annotated[list[HcaName], AfterValidator(_some_hcas)] = Field(
        default_factory=lambda: [f"mlx5_{i}" for i in range(8)]
    )
    """RDMA device names of the InfiniBand HCAs (``ibv_devices``); their order fixes HCA indices in GUIDs."""


class Node(Model):
    """An existing Kubernetes node. ``id`` feeds the GUID scheme, so it never changes once set."""

    name: DnsSubdomain
    id: NonNegativeInt
    node_group: DnsLabel


class OnPremPlatform(Model):
    """An existing bare-metal cluster with ConnectX HCAs, SR-IOV VFs and OpenSM."""

    kind: Literal["onprem"]
    kubeconfig_context: KubeconfigContext | None = None
    """kubeconfig context to deploy to; ``None`` uses the ambient kubeconfig's current context."""
    kubernetes_version: str | None = None
    """The cluster's Kubernetes version (``kubectl version``, e.g. ``1.37.2``), declared because
    gpuaas does not create this cluster. Required: checked against the support dates
    (components/model/kubernetes.py) and what moves with the minor (components/rules/versions.py).
    Optional in the model only so that every other problem is still reported when it is missing."""
    node_groups: list[NodeGroup]
    nodes: list[Node]
    fabric: Fabric = Fabric()
    multus: Multus | None = None
    """Required once a team has a P_Key partition (its NAD goes through Multus)."""

    @cached_property
    def groups_by_name(self) -> dict[str, NodeGroup]:
        return {g.name: g for g in self.node_groups}


# --------------------------------------------------------------------------------------------
# AKS platform


class ResourceGroup(Model):
    name: AzureResourceGroupName
    create: bool = True
    """``False``: the group exists and is only referenced."""


class SystemPool(Model):
    """The small inline System pool of the ManagedCluster (the API cannot update it in place)."""

    name: AksPoolName = "system"
    vm_size: AzureVmSize = "Standard_D8ds_v5"
    os_sku: Literal["Ubuntu2204", "Ubuntu2404"] = "Ubuntu2204"
    """One OS SKU for the whole cluster; ``Ubuntu2204`` runs up to Kubernetes 1.36 (components/rules/versions.py)."""
    min_count: int = 1
    max_count: PositiveInt = 3


class GpuPool(GpuSharing):
    """An ND InfiniBand GPU pool: its own AgentPool, and on Azure its own IB partition."""

    name: AksPoolName
    vm_size: str = "Standard_ND96isr_H100_v5"
    os_sku: Literal["Ubuntu2204", "Ubuntu2404"] = "Ubuntu2204"
    """Pinned because NVIDIA's DOCA and driver images are built per OS release. ``Ubuntu2204`` runs
    up to Kubernetes 1.36, ``Ubuntu2404`` from 1.32 to 1.38; every pool runs the same one
    (components/rules/versions.py; README, "Upgrading Kubernetes")."""
    min_count: NonNegativeInt = 0
    max_count: PositiveInt = 2
    taints: list[Taint] = Field(default_factory=lambda: ["nvidia.com/gpu=present:NoSchedule"])
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)

    @cached_property
    def gpu_model(self) -> str:
        sku = ND_SKUS.get(self.vm_size)
        return sku.gpu_model if sku else ""


class AksPlatform(Model):
    """Azure AKS with ND-series InfiniBand GPU pools (pulumi-azure-native v3)."""

    kind: Literal["aks"]
    subscription_id: AzureSubscriptionId
    location: AzureLocation
    """Must agree with ``azure-native:location`` where the stack sets it (components/loader.py parse_stack)."""
    resource_group: ResourceGroup
    cluster_name: DnsLabel
    kubernetes_version: KubernetesVersion = versions.AKS_KUBERNETES
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
    gpu_pools: list[GpuPool]

    @cached_property
    def pools_by_name(self) -> dict[str, GpuPool]:
        return {p.name: p for p in self.gpu_pools}


Platform = Annotated[OnPremPlatform | AksPlatform, Field(discriminator="kind")]
