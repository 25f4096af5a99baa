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
from components.clusters.onprem_nodes import OnPremNodesArgs
from components.dra.tenancy import DraTeam, DraTenancyArgs
from components.fabric.ib_node_config import IbNodeConfigArgs
from components.fabric.opensm import OpenSmArgs
from components.fabric.sriov_host import SriovHostArgs
from components.model import charts, elastic
from components.model import dra as dra_model
from components.model import hami as hami_model
from components.model.capacity import sharing_groups, sriov_partitions
from components.model.config import StackConfig
from components.model.platform import OnPremPlatform
from components.model.queues import effective_integrations
from components.model.teams import Team
from components.observability.component import ObservabilityArgs
from components.observability.groups import platform_groups, team_groups
from components.operators.gpu_operator import GpuGroup, GpuOperatorArgs, driver_enabled
from components.operators.hami import HamiArgs
from components.operators.network_operator import DEFAULT_CNI_NETWORK_DIRECTORY, NetworkOperatorArgs
from components.operators.nic_cluster_policy import NicClusterPolicyArgs
from components.operators.rdma_shared_device_plugin import RdmaSharedDevicePluginArgs
from components.proofs import burn_in, isolation, targets
from components.proofs.verification import VerificationArgs
from components.queueing.queues import Flavor, QueuesArgs, TeamQueue
from components.tenancy.admission import AdmissionArgs
from components.tenancy.networks import partition_networks, pool_taints
from components.tenancy.quotas import quota_hard
from components.tenancy.teams import TeamArgs, TeamsArgs

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


def admission(cfg: StackConfig) -> AdmissionArgs:
    """The admission guards: on-prem the partition guard; on AKS the pool guard with the pools no team owns;
    where HAMi runs (a node group's ``hami`` with its device plugin), the HAMi guard with its core policy."""
    settings = hami_model.settings(cfg) if hami_model.uses_hami(cfg) else None
    return AdmissionArgs(
        partitions=cfg.onprem is not None,
        node_pools=tuple(elastic.unowned_pools(cfg)) if cfg.aks is not None else None,
        hami_core_policy=settings.core_policy if settings is not None else None,
    )


def team(cfg: StackConfig, t: Team) -> TeamArgs:
    """One team of ``gpuaas:teams``: its quota as the platform renders it (every extended resource of the
    fleet), the DRA and HAMi namespace labels, on AKS its pool's taints."""
    return TeamArgs(
        team=t,
        quota=quota_hard(cfg, t),
        namespace_labels={**dra_model.namespace_labels(cfg, t), **hami_model.namespace_labels(cfg, t)},
        pool_taints=pool_taints(cfg, t),
    )


def teams(
    cfg: StackConfig,
    *,
    objects_after: tuple[pulumi.Resource, ...] = (),
    guards: tuple[pulumi.Resource, ...] = (),
) -> TeamsArgs:
    """The team set: every team (:func:`team`), on-prem the partitions' networks, with elastic quotas Kueue's
    integrations; the ordering (``objects_after``: what the team objects but the namespaces need first;
    ``guards``: the admission policies the quotas and RoleBindings wait for) handed through."""
    return TeamsArgs(
        teams=tuple(team(cfg, t) for t in cfg.teams),
        networks=partition_networks(cfg),
        queue_integrations=effective_integrations(cfg.queues) if cfg.queues.elastic else None,
        objects_after=objects_after,
        guards=guards,
    )


def queues(cfg: StackConfig) -> QueuesArgs:
    """Kueue and the team queues: ``gpuaas:queues``; a flavor per node group or ND pool (its taints on
    AKS); per team its cohort and the amounts :mod:`components.model.elastic` computes over the whole
    cluster; what HAMi and DRA make Kueue count; ClusterQueue metrics with ``observability``."""
    aks = cfg.aks
    return QueuesArgs(
        queues=cfg.queues,
        versions=cfg.versions,
        chart=chart_source(cfg, charts.KUEUE),
        flavors=tuple(
            Flavor(name, aks_pool=True, taints=tuple(aks.pools_by_name[name].taints))
            if aks is not None
            else Flavor(name)
            for _where, name, _sharing, _model in sharing_groups(cfg)
        ),
        teams=tuple(
            TeamQueue(team.name, team.ns, elastic.cohort(cfg, team), elastic.team_lines(cfg, team))
            for team in cfg.teams
        ),
        cluster_queue_metrics=cfg.observability.enabled,
        excluded_resource_prefixes=tuple(hami_model.kueue_excluded_prefixes(cfg)),
        transformations=tuple(hami_model.kueue_transformations(cfg)),
        device_class_mappings=tuple(dra_model.kueue_device_class_mappings(cfg)),
    )


def observability(cfg: StackConfig, *, kueue_after: tuple[pulumi.Resource, ...] = ()) -> ObservabilityArgs:
    """Monitoring: ``gpuaas:observability``; the rule groups computed over the fleet and the teams; Kueue's
    namespace with elastic queues (``kueue_after`` handed through unchanged)."""
    return ObservabilityArgs(
        observability=cfg.observability,
        team_groups=team_groups(cfg),
        groups=platform_groups(cfg),
        kueue_namespace=cfg.queues.namespace if cfg.queues.elastic else None,
        kueue_after=kueue_after,
    )


def dra(cfg: StackConfig) -> DraTenancyArgs:
    """The DRA model: the MIG profiles the node groups offer; per team the classes it may claim (its quota's,
    and with elastic quotas what it may borrow) and its groups; on AKS the pool guard and the unowned pools."""
    return DraTenancyArgs(
        mig_profiles=tuple(dra_model.offered_mig_profiles(cfg)),
        node_pools=cfg.aks is not None,
        unowned_pools=tuple(elastic.unowned_pools(cfg)),
        teams=tuple(
            DraTeam(team.name, team.ns, tuple(dra_model.claimable(cfg, team)), tuple(team.groups)) for team in cfg.teams
        ),
    )


def verification(cfg: StackConfig) -> VerificationArgs:
    """The proofs: ``gpuaas:verification`` and the images; where they run, paired over the whole stack (verify
    teams' partitions and AKS pools, the isolation probes, the node groups a burn-in fits on)."""
    found = tuple(targets.targets(cfg))
    return VerificationArgs(
        verification=cfg.verification,
        versions=cfg.versions,
        targets=found,
        probes=tuple(isolation.isolation_probes(cfg)),
        burn_in_groups=(
            {t.key: tuple(burn_in.burn_in_groups(cfg, t)) for t in found} if cfg.verification.burn_in.enabled else {}
        ),
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
