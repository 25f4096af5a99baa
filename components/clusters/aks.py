"""The AKS cluster: a small System pool inline, one AgentPool per ND InfiniBand GPU pool.

Functional core, thin shell: :func:`managed_cluster_args`, :func:`system_pool_profile`,
:func:`agent_pool_args`, :func:`node_labels`, :func:`pool_capacity` and
:func:`decode_kubeconfig` are pure and tested without Pulumi; :class:`AksCluster` only turns
their results into pulumi-azure-native v3 resources (REST 2025-09-01) and builds the one
Kubernetes provider every cluster component uses.

Sources: ../shared/reference/pulumi-azure.md §1 (pulumi-azure-native ManagedCluster/AgentPool
docs; azure-aks-docs use-nvidia-gpu.md, skip-gpu-driver-install-retirement.md, scale-cluster.md;
Azure/aks-rdma-infiniband prerequisites; pulumi/pulumi-azure-native#2943).
"""

from __future__ import annotations

import base64
from typing import Any, Final

import pulumi
import pulumi_azure_native as azure_native
import pulumi_kubernetes as k8s

from components.clusters.onprem_nodes import pool_labels
from components.guards.gate import gated
from components.model import hami
from components.model.capacity import group_capacity
from components.model.catalog import ND_SKUS
from components.model.config import StackConfig
from components.model.platform import AksPlatform, GpuPool

#: Azure registers the feature under this provider namespace (azure-aks-docs use-amd-gpus.md;
#: Azure/aks-rdma-infiniband getting-started/02-prerequisites.md).
INFINIBAND_FEATURE: Final = "AKSInfinibandSupport"
CONTAINER_SERVICE_NAMESPACE: Final = "Microsoft.ContainerService"

#: InfiniBand exists only on VMSS-backed pools; "Virtual Machines" pools have none
#: (azure-aks-docs virtual-machines-node-pools.md).
POOL_TYPE: Final = "VirtualMachineScaleSets"


# --------------------------------------------------------------------------------------------
# Pure core


def aks_platform(cfg: StackConfig) -> AksPlatform:
    """``cfg.platform`` of an AKS stack; the AKS functions are never called for on-prem."""
    if cfg.aks is None:
        raise ValueError(f"platform kind is {cfg.platform.kind!r}; AKS settings need kind aks")
    return cfg.aks


def node_labels(cfg: StackConfig, pool: GpuPool) -> dict[str, str]:
    """Kubernetes labels of a GPU pool's nodes: the user's labels, then gpuaas's over them.

    gpuaas's labels (:func:`components.clusters.onprem_nodes.pool_labels`: node group, MIG config,
    device-plugin config) are the same on-prem nodes get by NodePatch. On AKS they sit on the
    pool because AKS puts pool labels on every node it adds, autoscaled ones included. MIG is the
    GPU Operator's mig-manager, not AKS-managed MIG (``gpu_instance_profile``), which needs the
    AKS driver that ``driver=None`` skips (azure-aks-docs gpu-multi-instance.md). Rules refuse
    user labels with gpuaas's keys, so the merge order only matters as a safety net.
    """
    return {**pool.labels, **pool_labels(cfg, pool)}


#: VMSS tag prefix the cluster autoscaler reads for an empty scale set's template node
#: (kubernetes/autoscaler cluster-autoscaler/cloudprovider/azure/README.md, "Resources";
#: azure_template.go ``nodeResourcesTagName``). Azure tag names cannot hold ``/``, so the
#: autoscaler turns every ``_`` (and ``~2``) after the prefix into ``/``
#: (``extractAllocatableResourcesFromScaleSet``): a resource name with ``_`` cannot be written.
NODE_TEMPLATE_RESOURCES_TAG: Final = "k8s.io_cluster-autoscaler_node-template_resources_"


def node_resources(cfg: StackConfig, pool: GpuPool) -> dict[str, int]:
    """Extended resources one node of ``pool`` offers once its operators run, by name.

    GPUs as the pool's sharing makes them (whole, MIG instances, time-sliced shares or HAMi slices; the same
    arithmetic as the quota check, :func:`components.model.capacity.group_capacity`, per node), and the
    RDMA shared device's ``rdmaHcaMax`` slots when the plugin runs.
    """
    per_pool = group_capacity(cfg, pool.name, pool, pool.gpu_model)
    # HAMi's memory and cores are booked by its scheduler extender, never advertised by a node.
    out = {name: n // pool.max_count for name, n in per_pool.items() if name not in hami.PER_SLICE}
    if cfg.network.rdma_shared_device_plugin != "none":
        prefix, name = cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name
        out[f"{prefix}/{name}"] = cfg.network.rdma_hca_max
    return dict(sorted(out.items()))


def autoscaler_tags(cfg: StackConfig, pool: GpuPool) -> dict[str, str]:
    """Node-template tags so the cluster autoscaler scales an empty pool up for GPU/RDMA pods.

    With no node in the pool the autoscaler builds a template node from the VM size and the
    scale set's tags; it knows the SKU's ``nvidia.com/gpu`` count but not what the device
    plugins will advertise (``rdma/<name>``, MIG instances, shares), so a pod asking for those
    never fits the template and the pool stays at zero (Azure/AKS#2832 is the same for GPUs).
    AgentPool tags are put on the pool's VMSS; with ``existingCluster`` gpuaas creates no pool, so
    add them yourself (``az aks nodepool update --tags``). A resource whose name has ``_`` is left out: it
    cannot be written (see :data:`NODE_TEMPLATE_RESOURCES_TAG`); rules refuse it for pools that
    scale from zero.
    """
    return {
        NODE_TEMPLATE_RESOURCES_TAG + name.replace("/", "_"): str(n)
        for name, n in node_resources(cfg, pool).items()
        if "_" not in name
    }


def agent_pool_args(cfg: StackConfig, pool: GpuPool) -> dict[str, Any]:
    """Arguments of ``containerservice.AgentPool`` for one GPU pool (all but the cluster and group names).

    - ``gpu_profile.driver=None``: the GPU Operator installs the driver; the AKS driver and the
      operator's are mutually exclusive, and the ``SkipGPUDriverInstall`` tag it replaces was
      retired on 14 Aug 2025 (azure-aks-docs skip-gpu-driver-install-retirement.md). Create-time only.
    - ``os_sku`` pinned: DOCA/driver images are built per OS release; ``Ubuntu`` would switch to
      24.04 at Kubernetes 1.35 (azure-aks-docs upgrade-os-version.md).
    - ``count=min_count``: Azure requires ``count`` even with the autoscaler on
      (pulumi/pulumi-azure-native#2943); the shell ignores later changes to it.
    - ``orchestrator_version`` follows the cluster so an upgrade moves the pool with it.
    - ``tags``: the cluster autoscaler's node template (:func:`autoscaler_tags`), so a pool at
      ``minCount: 0`` scales up for the pods that ask for its RDMA and GPU resources.
    """
    return {
        "agent_pool_name": pool.name,
        "mode": "User",
        "type": POOL_TYPE,
        "os_type": "Linux",
        "os_sku": pool.os_sku,
        "vm_size": pool.vm_size,
        "orchestrator_version": aks_platform(cfg).kubernetes_version,
        "enable_auto_scaling": True,
        "min_count": pool.min_count,
        "max_count": pool.max_count,
        "count": pool.min_count,
        "node_taints": list(pool.taints),
        "node_labels": node_labels(cfg, pool),
        "gpu_profile": {"driver": "None"},
        "tags": autoscaler_tags(cfg, pool),
    }


def system_pool_profile(cfg: StackConfig) -> dict[str, Any]:
    """The inline System pool: small, autoscaled, never scaled to zero, no GPUs.

    It is the one pool the ManagedCluster must carry inline; the API cannot update inline
    profiles in place (pulumi-azure-native ManagedCluster docs), so GPU pools stay out of it.
    """
    aks = aks_platform(cfg)
    sp = aks.system_pool
    return {
        "name": sp.name,
        "mode": "System",
        "type": POOL_TYPE,
        "os_type": "Linux",
        "os_sku": sp.os_sku,
        "vm_size": sp.vm_size,
        "orchestrator_version": aks.kubernetes_version,
        "enable_auto_scaling": True,
        "min_count": sp.min_count,
        "max_count": sp.max_count,
        "count": sp.min_count,
    }


def managed_cluster_args(cfg: StackConfig) -> dict[str, Any]:
    """Arguments of ``containerservice.ManagedCluster`` (all but the resource group name).

    ``resource_name_`` is the Azure cluster name (``resource_name`` is Pulumi's logical name);
    without it azure-native appends a random suffix. ``kubernetes_version`` is pinned so a new
    AKS default never changes an existing stack.
    """
    aks = aks_platform(cfg)
    return {
        "resource_name_": aks.cluster_name,
        "location": aks.location,
        "kubernetes_version": aks.kubernetes_version,
        "dns_prefix": aks.cluster_name,
        "enable_rbac": True,
        "identity": {"type": "SystemAssigned"},
        "agent_pool_profiles": [system_pool_profile(cfg)],
    }


def pool_capacity(cfg: StackConfig) -> list[dict[str, Any]]:
    """Per GPU pool, what it adds at ``maxCount`` — the rows of the plan summary's pool table.

    Same arithmetic as :func:`components.model.capacity.capacity` (catalog GPUs per VM × maxCount).
    ``[]`` on-prem. Assumes the config passed :func:`components.rules.check`.
    """
    aks = cfg.aks
    if aks is None:
        return []
    rows: list[dict[str, Any]] = []
    for pool in aks.gpu_pools:
        sku = ND_SKUS[pool.vm_size]
        rows.append(
            {
                "pool": pool.name,
                "vm_size": pool.vm_size,
                "gpu_model": sku.gpu_model,
                "gpus_per_vm": sku.gpus,
                "max_nodes": pool.max_count,
                "max_gpus": sku.gpus * pool.max_count,
                "ib_gbps_per_gpu": sku.ib_gbps_per_gpu,
            }
        )
    return rows


def decode_kubeconfig(value: str) -> str:
    """``kubeconfigs[0].value`` of listClusterUserCredential is base64 of the kubeconfig YAML."""
    return base64.b64decode(value).decode()


# --------------------------------------------------------------------------------------------
# Shell


class AksCluster(pulumi.ComponentResource):
    """An AKS cluster with ND InfiniBand GPU pools, or an existing one, and a provider for it.

    Outputs: ``cluster_name``, ``kubeconfig`` (secret) and ``provider``, the single
    ``pulumi_kubernetes.Provider`` (server-side apply) that the platform hands to every
    cluster component.

    With ``existing_cluster`` nothing in Azure is created or changed: ``gpuPools`` then
    describe pools that already exist (for quotas and labels' consumers), and only the
    credentials are read by cluster and resource-group name.

    Takes the whole :class:`StackConfig`, like the other components, because the pools' node
    labels come from :func:`components.clusters.onprem_nodes.pool_labels`, which does. ``gate``: the
    day-2 MIG guard (:mod:`components.guards.mig`); the pools' labels wait for it. On the first
    preview of a new cluster the kubeconfig is unknown, so the provider is too (pulumi-azure.md
    §1.5: test that preview of a fresh ``aks`` stack once).
    """

    cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    #: The ND pools gpuaas manages (none for an existing cluster): their labels carry MIG layouts.
    gpu_pools: list[pulumi.CustomResource]
    #: The ManagedCluster and its pools (none for an existing cluster): they carry the Kubernetes version.
    versioned: list[pulumi.CustomResource]

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        gate: pulumi.Output[bool] | None = None,
    ) -> None:
        super().__init__("gpuaas:index:AksCluster", name, None, opts)
        aks = aks_platform(cfg)
        self.gpu_pools = []
        self.versioned = []
        cs = azure_native.containerservice

        # Subscription-wide and independent of this cluster, so it is registered even for an
        # existing cluster when asked.
        feature = self._infiniband_feature(name) if aks.register_infiniband_feature else None

        rg_name: pulumi.Input[str]
        cluster_name: pulumi.Output[str]
        if aks.existing_cluster:
            rg_name = aks.resource_group.name
            cluster_name = pulumi.Output.from_input(aks.cluster_name)
        else:
            if aks.resource_group.create:
                rg = azure_native.resources.ResourceGroup(
                    f"{name}-rg",
                    resource_group_name=aks.resource_group.name,
                    location=aks.location,
                    opts=pulumi.ResourceOptions(parent=self),
                )
                rg_name = rg.name
            else:
                rg_name = aks.resource_group.name
            cluster_args = managed_cluster_args(cfg)
            # A version change waits on the day-2 guard (components/guards/kubernetes_version.py):
            # AKS upgrades one minor at a time, and never back.
            cluster_args["kubernetes_version"] = gated(gate, cluster_args["kubernetes_version"])
            cluster = cs.ManagedCluster(
                f"{name}-cluster",
                resource_group_name=rg_name,
                **cluster_args,
                # The autoscaler owns the System pool's node count after creation (``[*]``: Pulumi
                # property-path wildcard, https://www.pulumi.com/docs/iac/concepts/options/ignorechanges/).
                opts=pulumi.ResourceOptions(parent=self, protect=True, ignore_changes=["agentPoolProfiles[*].count"]),
            )
            cluster_name = cluster.name
            self.versioned.append(cluster)
            for pool in aks.gpu_pools:
                args = agent_pool_args(cfg, pool)
                gpu_profile = cs.GPUProfileArgs(**args.pop("gpu_profile"))
                # A MIG layout change relabels the pool's nodes, a version change upgrades them: both
                # wait on the day-2 guards.
                args["node_labels"] = gated(gate, args["node_labels"])
                args["orchestrator_version"] = gated(gate, args["orchestrator_version"])
                agent_pool = cs.AgentPool(
                    f"{name}-{pool.name}",
                    resource_group_name=rg_name,
                    resource_name_=cluster.name,
                    gpu_profile=gpu_profile,
                    **args,
                    opts=pulumi.ResourceOptions(
                        parent=self,
                        protect=True,
                        ignore_changes=["count"],
                        depends_on=[feature] if feature is not None else [],
                    ),
                )
                self.gpu_pools.append(agent_pool)
                self.versioned.append(agent_pool)

        creds = cs.list_managed_cluster_user_credentials_output(
            resource_group_name=rg_name,
            resource_name=cluster_name,
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        self.cluster_name = cluster_name
        self.kubeconfig = pulumi.Output.secret(creds.apply(lambda c: decode_kubeconfig(c.kubeconfigs[0].value)))
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def _infiniband_feature(self, name: str) -> azure_native.features.SubscriptionFeatureRegistration:
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
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
        )
