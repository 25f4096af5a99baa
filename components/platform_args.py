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

from components.clusters.onprem_nodes import OnPremNodesArgs
from components.fabric.ib_node_config import IbNodeConfigArgs
from components.fabric.opensm import OpenSmArgs
from components.fabric.sriov_host import SriovHostArgs
from components.model import charts
from components.model import hami as hami_model
from components.model.capacity import sharing_groups, sriov_partitions
from components.model.config import StackConfig
from components.model.platform import OnPremPlatform
from components.operators.gpu_operator import GpuGroup, GpuOperatorArgs, driver_enabled
from components.operators.hami import HamiArgs
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


def _onprem(cfg: StackConfig, component: str) -> OnPremPlatform:
    """The on-prem platform section; ``component`` exists on-prem only (Platform builds it there alone)."""
    if cfg.onprem is None:
        raise ValueError(f"{component} is built for platform kind onprem only")
    return cfg.onprem


def onprem_nodes(cfg: StackConfig, *, gate: Gate = None) -> OnPremNodesArgs:
    """The on-prem node labels: ``platform.nodeGroups`` and ``platform.nodes``."""
    onprem = _onprem(cfg, "OnPremNodes")
    return OnPremNodesArgs(node_groups=tuple(onprem.node_groups), nodes=tuple(onprem.nodes), gate=gate)


def sriov_host(cfg: StackConfig, *, gate: Gate = None) -> SriovHostArgs:
    """The SR-IOV host side: the fleet (``platform.nodeGroups``, ``nodes``, ``fabric``), the team
    partitions' VF indices and P_Keys, ``gpuaas:network`` and ``versions``."""
    onprem = _onprem(cfg, "SriovHost")
    return SriovHostArgs(
        node_groups=tuple(onprem.node_groups),
        nodes=tuple(onprem.nodes),
        fabric=onprem.fabric,
        partitions=dict(sriov_partitions(cfg)),
        network=cfg.network,
        versions=cfg.versions,
        gate=gate,
    )


def opensm(cfg: StackConfig, *, gate: Gate = None) -> OpenSmArgs:
    """OpenSM's files: the fleet (``platform.nodeGroups``, ``nodes``, ``fabric``), the team partitions,
    ``gpuaas:network`` and ``versions``."""
    onprem = _onprem(cfg, "OpenSm")
    return OpenSmArgs(
        node_groups=tuple(onprem.node_groups),
        nodes=tuple(onprem.nodes),
        fabric=onprem.fabric,
        partitions=dict(sriov_partitions(cfg)),
        network=cfg.network,
        versions=cfg.versions,
        gate=gate,
    )


def hami(cfg: StackConfig, *, release_after: tuple[pulumi.Resource, ...] = ()) -> HamiArgs:
    """HAMi: the first HAMi group's settings (the rules make every group agree), the declared Kubernetes
    version, where the GPU driver comes from, and on AKS the HAMi pools' taints."""
    settings = hami_model.settings(cfg)
    version = cfg.platform.kubernetes_version
    if settings is None or version is None:
        raise ValueError("HAMi is built for a stack with a HAMi node group and platform.kubernetesVersion")
    groups = {name for _where, name, _settings, _model in hami_model.hami_groups(cfg)}
    pools = cfg.aks.gpu_pools if cfg.aks is not None else []
    return HamiArgs(
        kubernetes_version=version,
        settings=settings,
        versions=cfg.versions,
        chart=chart_source(cfg, charts.HAMI),
        operator_driver=driver_enabled(cfg.gpu_operator, aks=cfg.aks is not None),
        gpu_operator_namespace=cfg.gpu_operator.namespace,
        network=cfg.network,
        taints=tuple(t for pool in pools if pool.name in groups for t in pool.taints),
        release_after=release_after,
    )
