"""The AKS cluster (a small System pool inline) and one component per ND InfiniBand GPU pool.

Two components, each usable alone (issue #33): :class:`AksCluster` creates the resource group, the
ManagedCluster and the Kubernetes provider every cluster component uses, or reads an existing
cluster's credentials; :class:`AksNdPool` adds one ND InfiniBand GPU AgentPool to a cluster, gpuaas'
or an existing one, named by its resource group and cluster name. Each takes its own arguments
(:class:`AksClusterArgs`, :class:`AksNdPoolArgs`); :mod:`components.platform_args` maps a stack
config onto them.

Functional core, thin shell: :func:`managed_cluster_args`, :func:`system_pool_profile`,
:func:`agent_pool_args` and :func:`decode_kubeconfig` are pure and tested without Pulumi; the
components only turn their results into pulumi-azure-native v3 resources (REST 2025-09-01). What a
stack config says of its ND pools (their nodes' labels, the autoscaler's node template, capacity) is
:mod:`components.clusters.nd_pools`: neither component reads a stack config.

Sources: ../shared/reference/pulumi-azure.md §1 (pulumi-azure-native ManagedCluster/AgentPool
docs; azure-aks-docs use-nvidia-gpu.md, skip-gpu-driver-install-retirement.md, scale-cluster.md;
Azure/aks-rdma-infiniband prerequisites; pulumi/pulumi-azure-native#2943).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import pulumi
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s

from components import k8s as kube
from components.guards.gate import gated
from components.model import versions
from components.model.platform import GpuPool, ResourceGroup, SystemPool

#: Azure registers the feature under this provider namespace (azure-aks-docs use-amd-gpus.md;
#: Azure/aks-rdma-infiniband getting-started/02-prerequisites.md).
INFINIBAND_FEATURE: Final = "AKSInfinibandSupport"
CONTAINER_SERVICE_NAMESPACE: Final = "Microsoft.ContainerService"

#: InfiniBand exists only on VMSS-backed pools; "Virtual Machines" pools have none
#: (azure-aks-docs virtual-machines-node-pools.md).
POOL_TYPE: Final = "VirtualMachineScaleSets"


def _pool_default(name: str) -> Any:
    """The stack file's default of a ``gpuPools[]`` field: one source for the config and :class:`AksNdPoolArgs`."""
    return GpuPool.model_fields[name].get_default(call_default_factory=True)


@dataclass(frozen=True, kw_only=True)
class AksClusterArgs:
    """Arguments of :class:`AksCluster`. Ordering: ``opts.depends_on``, forwarded to every child."""

    cluster_name: str
    """The AKS managed cluster's name in Azure, also its DNS prefix; with ``existing_cluster``, the cluster read."""
    resource_group: ResourceGroup
    """The cluster's resource group: its name, and whether the component creates it (never for an existing
    cluster)."""
    location: str
    """Azure region of the cluster and of the resource group the component creates."""
    kubernetes_version: str = versions.AKS_KUBERNETES
    """Kubernetes version of the cluster and its System pool (defaults to the version gpuaas pins); a change
    waits on ``gate``."""
    system_pool: SystemPool = field(default_factory=SystemPool)
    """The inline System pool (defaults: :class:`~components.model.platform.SystemPool`'s)."""
    existing_cluster: bool = False
    """Create nothing in Azure: only read the user credentials of ``cluster_name`` in the resource group."""
    register_infiniband_feature: bool = False
    """Register the subscription-wide ``AKSInfinibandSupport`` feature (:attr:`AksCluster.infiniband_feature`;
    pools created before it is ``Registered`` get no InfiniBand placement), also for an existing cluster."""
    gate: pulumi.Output[bool] | None = None
    """The day-2 guards' gate: the cluster's Kubernetes version is sent once it passes (``None``: at once)."""


@dataclass(frozen=True, kw_only=True)
class AksNdPoolArgs:
    """Arguments of :class:`AksNdPool`: one ND InfiniBand GPU pool of a cluster, gpuaas' or an existing one.

    Ordering: ``opts.depends_on``, forwarded to the AgentPool; put the ``AKSInfinibandSupport`` feature
    registration there (:attr:`AksCluster.infiniband_feature`) so the pool is created after it.
    """

    resource_group_name: pulumi.Input[str]
    """The cluster's resource group (an ``AksCluster``'s :attr:`~AksCluster.resource_group_name`, or a name)."""
    cluster_name: pulumi.Input[str]
    """The AKS cluster's name (an ``AksCluster``'s :attr:`~AksCluster.cluster_name`, or a name)."""
    pool_name: str
    """The AKS agent pool's name (lowercase letters and digits, at most 12)."""
    orchestrator_version: str
    """Kubernetes version of the pool's nodes: the cluster's (AKS refuses one above it); a change waits on
    ``gate``."""
    vm_size: str = _pool_default("vm_size")
    """Azure VM size: an ND size with InfiniBand (components/model/catalog.py ``ND_SKUS``; defaults to the stack
    file's, ND H100 v5)."""
    os_sku: Literal["Ubuntu2204", "Ubuntu2404"] = _pool_default("os_sku")
    """Node OS, pinned: NVIDIA's DOCA and driver images are built per OS release (defaults to the stack file's)."""
    min_count: int = _pool_default("min_count")
    """Fewest nodes the cluster autoscaler keeps; also the pool's ``count`` at creation, not updated later
    (defaults to the stack file's, 0: the pool scales from zero through ``tags``)."""
    max_count: int = _pool_default("max_count")
    """Most nodes the cluster autoscaler adds (defaults to the stack file's)."""
    taints: tuple[str, ...] = tuple(_pool_default("taints"))
    """Taints of the pool's nodes, ``key=value:Effect`` (defaults to the stack file's,
    ``nvidia.com/gpu=present:NoSchedule``)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Every Kubernetes label of the pool's nodes (AKS puts them on autoscaled nodes too), gpuaas' node group,
    MIG and device-plugin config labels included (:func:`components.clusters.nd_pools.node_labels`). A change
    waits on ``gate``."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags of the pool's scale set: the cluster autoscaler's node template of an empty pool
    (:func:`components.clusters.nd_pools.autoscaler_tags`), so it scales up for pods asking for RDMA or MIG
    resources."""
    gpu_driver: Literal["None", "Install"] = "None"
    """``gpuProfile.driver``: ``None`` (the default) leaves the driver to the GPU Operator, which gpuaas installs;
    ``Install`` is the AKS driver. Create-time only."""
    gate: pulumi.Output[bool] | None = None
    """The day-2 guards' gate: a change of labels (MIG layouts) or version is sent once it passes."""


# --------------------------------------------------------------------------------------------
# Pure core


def agent_pool_args(args: AksNdPoolArgs) -> dict[str, Any]:
    """Arguments of ``containerservice.AgentPool`` for one ND pool (all but the cluster and group names).

    - ``gpu_profile.driver``: ``None`` by default, the GPU Operator installs the driver; the AKS driver and the
      operator's are mutually exclusive, and the ``SkipGPUDriverInstall`` tag it replaces was
      retired on 14 Aug 2025 (azure-aks-docs skip-gpu-driver-install-retirement.md). Create-time only.
    - ``os_sku`` pinned: DOCA/driver images are built per OS release; ``Ubuntu`` would switch to
      24.04 at Kubernetes 1.35 (azure-aks-docs upgrade-os-version.md).
    - ``count=min_count``: Azure requires ``count`` even with the autoscaler on
      (pulumi/pulumi-azure-native#2943); the shell ignores later changes to it.
    - ``orchestrator_version`` follows the cluster so an upgrade moves the pool with it.
    - ``tags``: the cluster autoscaler's node template (:func:`components.clusters.nd_pools.autoscaler_tags`),
      so a pool at ``minCount: 0`` scales up for the pods that ask for its RDMA and GPU resources.
    """
    return {
        "agent_pool_name": args.pool_name,
        "mode": "User",
        "type": POOL_TYPE,
        "os_type": "Linux",
        "os_sku": args.os_sku,
        "vm_size": args.vm_size,
        "orchestrator_version": args.orchestrator_version,
        "enable_auto_scaling": True,
        "min_count": args.min_count,
        "max_count": args.max_count,
        "count": args.min_count,
        "node_taints": list(args.taints),
        "node_labels": dict(args.labels),
        "gpu_profile": {"driver": args.gpu_driver},
        "tags": dict(args.tags),
    }


def system_pool_profile(args: AksClusterArgs) -> dict[str, Any]:
    """The inline System pool: small, autoscaled, never scaled to zero, no GPUs.

    It is the one pool the ManagedCluster must carry inline; the API cannot update inline
    profiles in place (pulumi-azure-native ManagedCluster docs), so GPU pools stay out of it.
    """
    sp = args.system_pool
    return {
        "name": sp.name,
        "mode": "System",
        "type": POOL_TYPE,
        "os_type": "Linux",
        "os_sku": sp.os_sku,
        "vm_size": sp.vm_size,
        "orchestrator_version": args.kubernetes_version,
        "enable_auto_scaling": True,
        "min_count": sp.min_count,
        "max_count": sp.max_count,
        "count": sp.min_count,
    }


def managed_cluster_args(args: AksClusterArgs) -> dict[str, Any]:
    """Arguments of ``containerservice.ManagedCluster`` (all but the resource group name).

    ``resource_name_`` is the Azure cluster name (``resource_name`` is Pulumi's logical name);
    without it azure-native appends a random suffix. ``kubernetes_version`` is pinned so a new
    AKS default never changes an existing stack.
    """
    return {
        "resource_name_": args.cluster_name,
        "location": args.location,
        "kubernetes_version": args.kubernetes_version,
        "dns_prefix": args.cluster_name,
        "enable_rbac": True,
        "identity": {"type": "SystemAssigned"},
        "agent_pool_profiles": [system_pool_profile(args)],
    }


def decode_kubeconfig(value: str) -> str:
    """``kubeconfigs[0].value`` of listClusterUserCredential is base64 of the kubeconfig YAML."""
    return base64.b64decode(value).decode()


# --------------------------------------------------------------------------------------------
# Shell


class AksCluster(pulumi.ComponentResource):
    """An AKS cluster (System pool inline) or an existing one, and a Kubernetes provider for it.

    Outputs: ``cluster_name``, ``resource_group_name`` (what :class:`AksNdPool` takes; they carry the
    cluster and group as dependencies), ``kubeconfig`` (secret) and ``provider``, the single
    ``pulumi_kubernetes.Provider`` (server-side apply) that the platform hands to every cluster
    component. The GPU pools are :class:`AksNdPool` components, one per pool; gpuaas parents them to
    this component.

    With ``existing_cluster`` nothing in Azure is created or changed: only the credentials are read
    by cluster and resource-group name. On the first preview of a new cluster the kubeconfig is
    unknown, so the provider is too (pulumi-azure.md §1.5: test that preview of a fresh ``aks``
    stack once).
    """

    cluster_name: pulumi.Output[str]
    resource_group_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    #: The ManagedCluster (``None`` for an existing cluster): it carries the Kubernetes version.
    cluster: pulumi.CustomResource | None
    #: The ``AKSInfinibandSupport`` registration when asked for: the ND pools' ``opts.depends_on``.
    infiniband_feature: pulumi.CustomResource | None

    def __init__(self, name: str, args: AksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:AksCluster", name, None, opts)
        after = kube.depends_on(opts)
        cs = azure_native.containerservice
        self.cluster = None

        # Subscription-wide and independent of this cluster, so it is registered even for an
        # existing cluster when asked.
        self.infiniband_feature = self._infiniband_feature(name, after) if args.register_infiniband_feature else None

        rg_name: pulumi.Input[str]
        cluster_name: pulumi.Output[str]
        if args.existing_cluster:
            rg_name = args.resource_group.name
            cluster_name = pulumi.Output.from_input(args.cluster_name)
        else:
            if args.resource_group.create:
                rg = azure_native.resources.ResourceGroup(
                    f"{name}-rg",
                    resource_group_name=args.resource_group.name,
                    location=args.location,
                    opts=kube.child(self, after),
                )
                rg_name = rg.name
            else:
                rg_name = args.resource_group.name
            cluster_args = managed_cluster_args(args)
            # A version change waits on the day-2 guard (components/guards/kubernetes_version.py):
            # AKS upgrades one minor at a time, and never back.
            cluster_args["kubernetes_version"] = gated(args.gate, cluster_args["kubernetes_version"])
            cluster = cs.ManagedCluster(
                f"{name}-cluster",
                resource_group_name=rg_name,
                **cluster_args,
                # The autoscaler owns the System pool's node count after creation (``[*]``: Pulumi
                # property-path wildcard, https://www.pulumi.com/docs/iac/concepts/options/ignorechanges/).
                opts=pulumi.ResourceOptions(
                    parent=self, protect=True, ignore_changes=["agentPoolProfiles[*].count"], depends_on=after
                ),
            )
            cluster_name = cluster.name
            self.cluster = cluster

        creds = cs.list_managed_cluster_user_credentials_output(
            resource_group_name=rg_name,
            resource_name=cluster_name,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=after or None),
        )
        self.cluster_name = cluster_name
        self.resource_group_name = pulumi.Output.from_input(rg_name)
        self.kubeconfig = pulumi.Output.secret(creds.apply(lambda c: decode_kubeconfig(c.kubeconfigs[0].value)))
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=kube.child(self, after),
        )
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def _infiniband_feature(
        self, name: str, after: list[pulumi.Resource]
    ) -> azure_native.features.SubscriptionFeatureRegistration:
        """Register ``AKSInfinibandSupport`` so a pool's VMs land on one physical IB network.

        Subscription-wide: it affects every AKS cluster in the subscription, so it is retained
        when the stack is destroyed (deleting it would unregister the feature for all of them).
        Asynchronous: Azure answers while the state is still ``Registering``; a pool created
        before it reaches ``Registered`` (and before ``az provider register -n
        Microsoft.ContainerService`` propagates it) does not get IB placement. Register it once
        out of band, or rerun ``pulumi up`` after ``az feature show --namespace
        Microsoft.ContainerService --name AKSInfinibandSupport`` says ``Registered``
        (pulumi-azure.md §1.6; Azure/aks-rdma-infiniband PR #15 polls the same way).
        """
        return azure_native.features.SubscriptionFeatureRegistration(
            f"{name}-infiniband",
            provider_namespace=CONTAINER_SERVICE_NAMESPACE,
            feature_name=INFINIBAND_FEATURE,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True, depends_on=after),
        )


class AksNdPool(pulumi.ComponentResource):
    """One ND InfiniBand GPU pool: an autoscaled VMSS AgentPool, protected, on a cluster named by its arguments.

    The AgentPool carries the component's own name, and also answers to the URN it has as a direct
    child of the component's parent: gpuaas registered its pools as children of :class:`AksCluster`
    before this component existed (issue #33), so a stack that created them there keeps them, with no
    replace (``aliases``; tests/test_urns.py checks every old URN is kept or aliased). The labels and
    version wait on ``args.gate``; ``count`` is left to the autoscaler after creation.
    """

    agent_pool: pulumi.CustomResource
    pool_name: str

    def __init__(self, name: str, args: AksNdPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:AksNdPool", name, None, opts)
        parent = opts.parent if opts is not None else None
        pool = agent_pool_args(args)
        gpu_profile = azure_native.containerservice.GPUProfileArgs(**pool.pop("gpu_profile"))
        # A MIG layout change relabels the pool's nodes, a version change upgrades them: both wait on
        # the day-2 guards.
        pool["node_labels"] = gated(args.gate, pool["node_labels"])
        pool["orchestrator_version"] = gated(args.gate, pool["orchestrator_version"])
        self.pool_name = args.pool_name
        self.agent_pool = azure_native.containerservice.AgentPool(
            name,
            resource_group_name=args.resource_group_name,
            resource_name_=args.cluster_name,
            gpu_profile=gpu_profile,
            **pool,
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=True,
                ignore_changes=["count"],
                depends_on=kube.depends_on(opts),
                aliases=[pulumi.Alias(parent=parent)] if parent is not None else None,
            ),
        )
        self.register_outputs({"poolName": self.pool_name})
