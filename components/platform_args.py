"""The stack config mapped onto each component's own arguments: the one place that reads ``StackConfig``
for a component (issue #33).

Every component takes ``(name, args, opts)`` with an arguments type of its own (a frozen dataclass in
the component's module, every field documented there), so a program that is not gpuaas' can build one
from hand-written arguments. :class:`components.platform.Platform` builds them from a parsed stack
config through the functions below: pure (no resource is created here; ordering and the day-2 gate are
handed in as values), one per component, tested in ``tests/test_platform_args.py``.
"""

from __future__ import annotations

import pulumi

from components.clusters import nd_pools
from components.clusters.aks import AksClusterArgs, AksNdPoolArgs
from components.fabric.ib_node_config import IbNodeConfigArgs
from components.model import charts
from components.model.capacity import sharing_groups, sriov_partitions
from components.model.config import StackConfig
from components.operators.gpu_operator import GpuGroup, GpuOperatorArgs, driver_enabled
from components.operators.network_operator import DEFAULT_CNI_NETWORK_DIRECTORY, NetworkOperatorArgs
from components.operators.nic_cluster_policy import NicClusterPolicyArgs
from components.operators.rdma_shared_device_plugin import RdmaSharedDevicePluginArgs

#: The day-2 guards' gate (:meth:`components.platform.Platform._mig_gate`), handed through unchanged.
Gate = pulumi.Output[bool] | None


def chart_source(cfg: StackConfig, name: str) -> charts.Source:
    """The chart ``name`` at the stack's pinned version, from the stack's chart source (``gpuaas:charts``)."""
    return charts.source(cfg.charts, charts.chart(cfg.versions, name))


def network_operator(cfg: StackConfig) -> NetworkOperatorArgs:
    """The Network Operator: ``gpuaas:network``; on-prem Multus' CNI directory; on AKS the IB VFs' rule."""
    onprem = cfg.onprem
    return NetworkOperatorArgs(
        network=cfg.network,
        chart=chart_source(cfg, charts.NETWORK_OPERATOR),
        cni_network_directory=(
            onprem.multus.cni_conf_dir
            if onprem is not None and onprem.multus is not None
            else DEFAULT_CNI_NETWORK_DIRECTORY
        ),
        azure_vfs=cfg.aks is not None,
    )


def nic_cluster_policy(cfg: StackConfig, *, gate: Gate = None) -> NicClusterPolicyArgs:
    """The NicClusterPolicy: ``gpuaas:network`` and ``versions``; on-prem the team partitions' VF pools,
    Multus and the fabric's IPAM; on AKS the IB VFs' rule."""
    onprem = cfg.onprem
    return NicClusterPolicyArgs(
        network=cfg.network,
        versions=cfg.versions,
        azure_vfs=cfg.aks is not None,
        secondary_network=onprem is not None,
        sriov_pkeys=tuple(part.pkey for _team, part in sriov_partitions(cfg)),
        multus=onprem.multus if onprem is not None else None,
        nv_ipam=onprem is not None and onprem.fabric.ipam == "nv-ipam",
        gate=gate,
    )


def rdma_shared_device_plugin(cfg: StackConfig) -> RdmaSharedDevicePluginArgs:
    """The standalone RDMA shared device plugin: physical functions only beside on-prem team VF pools."""
    return RdmaSharedDevicePluginArgs(
        network=cfg.network,
        versions=cfg.versions,
        physical_functions_only=cfg.onprem is not None and bool(sriov_partitions(cfg)),
    )


def ib_node_config(cfg: StackConfig) -> IbNodeConfigArgs:
    """ib-node-config on every RDMA node: on-prem ``platform.nodes``, on AKS every ND pool at ``maxCount``."""
    if cfg.onprem is not None:
        nodes = len(cfg.onprem.nodes)
    elif cfg.aks is not None:
        nodes = sum(p.max_count for p in cfg.aks.gpu_pools)
    else:
        nodes = 0
    return IbNodeConfigArgs(network=cfg.network, versions=cfg.versions, nodes=nodes)


def gpu_operator(
    cfg: StackConfig, *, release_after: tuple[pulumi.Resource, ...] = (), gate: Gate = None
) -> GpuOperatorArgs:
    """The GPU Operator: ``gpuaas:gpuOperator``, the node groups or ND pools, the driver per platform,
    where the NIC driver lives (``network.ofedDriver``) and the dcgm metrics (``observability``)."""
    return GpuOperatorArgs(
        gpu_operator=cfg.gpu_operator,
        versions=cfg.versions,
        chart=chart_source(cfg, charts.GPU_OPERATOR),
        driver_enabled=driver_enabled(cfg.gpu_operator, aks=cfg.aks is not None),
        host_mofed=cfg.network.ofed_driver == "host",
        groups=tuple(GpuGroup(name, sharing, model) for _where, name, sharing, model in sharing_groups(cfg)),
        observability=cfg.observability,
        release_after=release_after,
        gate=gate,
    )


def aks_cluster(cfg: StackConfig, gate: Gate = None) -> AksClusterArgs:
    """The AKS cluster: ``gpuaas:platform`` (kind ``aks``) but its GPU pools, which are :func:`aks_nd_pools`."""
    p = nd_pools.aks_platform(cfg)
    return AksClusterArgs(
        cluster_name=p.cluster_name,
        resource_group=p.resource_group,
        location=p.location,
        kubernetes_version=p.kubernetes_version,
        system_pool=p.system_pool,
        existing_cluster=p.existing_cluster,
        register_infiniband_feature=p.register_infiniband_feature,
        gate=gate,
    )


def aks_nd_pools(
    cfg: StackConfig,
    gate: Gate = None,
    *,
    resource_group_name: pulumi.Input[str] | None = None,
    cluster_name: pulumi.Input[str] | None = None,
) -> tuple[AksNdPoolArgs, ...]:
    """One ND pool per ``gpuaas:platform.gpuPools`` item, in order: the pool's own settings, its nodes' labels
    (the user's with gpuaas' node group, MIG and device-plugin config over them) and the autoscaler's
    node-template tags, both computed here from the whole config so that the pool needs none of it.

    ``resource_group_name``/``cluster_name``: the cluster's (an ``AksCluster``'s outputs, which order the
    pools after it); ``None`` names the config's. With ``existingCluster`` the pools already exist: the
    caller creates none (the args still describe them).
    """
    p = nd_pools.aks_platform(cfg)
    return tuple(
        AksNdPoolArgs(
            resource_group_name=p.resource_group.name if resource_group_name is None else resource_group_name,
            cluster_name=p.cluster_name if cluster_name is None else cluster_name,
            pool_name=pool.name,
            orchestrator_version=p.kubernetes_version,
            vm_size=pool.vm_size,
            os_sku=pool.os_sku,
            min_count=pool.min_count,
            max_count=pool.max_count,
            taints=tuple(pool.taints),
            labels=nd_pools.node_labels(cfg, pool),
            tags=nd_pools.autoscaler_tags(cfg, pool),
            gate=gate,
        )
        for pool in p.gpu_pools
    )
