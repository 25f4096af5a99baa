"""The composition root: every component of the platform, in install order.

Each step says why it sits where it does. Ordering between steps is expressed with
``depends_on`` so that ``pulumi up`` and the offline plan show the same order.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import platform_args
from components.clusters.aks import AksCluster, AksNdPool
from components.clusters.onprem_nodes import OnPremNodes
from components.dra.tenancy import DraTenancy
from components.fabric.ib_node_config import IbNodeConfig
from components.fabric.opensm import OpenSm
from components.fabric.sriov_host import SriovHost
from components.guards import fabric as fabric_guard
from components.guards import gate, mig, resource_model
from components.guards import kubernetes_version as version_guard
from components.model import dra, hami, kubernetes
from components.model.config import StackConfig
from components.observability.component import Observability
from components.operators import rdma_shared_device_plugin
from components.operators.gpu_operator import GpuOperator
from components.operators.hami import Hami
from components.operators.network_operator import NetworkOperator
from components.operators.nic_cluster_policy import NicClusterPolicy
from components.operators.rdma_shared_device_plugin import RdmaSharedDevicePlugin
from components.proofs.verification import Verification
from components.queueing.queues import Queues
from components.tenancy.admission import Admission
from components.tenancy.teams import Teams


def _after(opts: pulumi.ResourceOptions, *resources: pulumi.Resource) -> pulumi.ResourceOptions:
    """``opts`` ordered after ``resources``: a component forwards its ``depends_on`` to its children."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(resources)))


class Platform(pulumi.ComponentResource):
    """The whole GPU-as-a-Service platform for one stack."""

    exports: dict[str, Any]

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        today: date = kubernetes.REVIEWED,
    ) -> None:
        """``today``: the date ``__main__.py`` read once; the version guard judges the last run's minor by it."""
        super().__init__("gpuaas:index:Platform", name, None, opts)
        self._today = today
        self.exports = {}
        #: The resources whose labels carry the MIG layouts (NodePatches or AKS agent pools).
        self._labelled: list[pulumi.CustomResource] = []
        #: The resources that carry the Kubernetes version (the AKS cluster and its pools).
        self._versioned: list[pulumi.CustomResource] = []

        # 1. Cluster access. AKS: the cluster and its ND pools come first and hand us a provider
        #    built from their kubeconfig. On-prem: the cluster exists; we only pick the context.
        #    Server-side apply lets NodePatch own only the labels we set.
        mig_gate = self._mig_gate(name, cfg)
        provider = self._cluster(name, cfg, mig_gate)
        cluster_opts = pulumi.ResourceOptions(parent=self, providers={"kubernetes": provider})
        _ = cluster_opts  # used by the steps below as they land

        # 2. Network Operator (NFD + operator), then 3. its NicClusterPolicy once the CRD exists;
        #    Pulumi waits until the operator has reconciled the policy (status.state written), never
        #    for nodes to be ready: docs/notes/what-a-run-waits-for.md.
        network_operator = NetworkOperator(
            f"{name}-network-operator", platform_args.network_operator(cfg), cluster_opts
        )
        nic_cluster_policy = NicClusterPolicy(
            f"{name}-nic-cluster-policy",
            platform_args.nic_cluster_policy(cfg, gate=mig_gate),
            _after(cluster_opts, network_operator.release),
        )
        # 4. ib-node-config: kernel modules and memlock, before any RDMA pod is scheduled; after the
        #    policy so the containerized DOCA driver has replaced the inbox modules it loads.
        IbNodeConfig(
            f"{name}-ib-node-config", platform_args.ib_node_config(cfg), _after(cluster_opts, nic_cluster_policy.policy)
        )
        # 5. RDMA shared device plugin (standalone form only; otherwise part of the policy), after
        #    the policy: the plugin finds RDMA devices only once the NIC driver is loaded.
        if rdma_shared_device_plugin.standalone(cfg.network):
            RdmaSharedDevicePlugin(
                f"{name}-rdma-shared-device-plugin",
                platform_args.rdma_shared_device_plugin(cfg),
                pulumi.ResourceOptions.merge(
                    cluster_opts, pulumi.ResourceOptions(depends_on=[nic_cluster_policy.policy])
                ),
            )
        # 6. GPU Operator after the NicClusterPolicy is reconciled; per node, its driver waits for the
        #    NIC driver itself (GPUDirect), so no run waits for a node.
        gpu_operator = GpuOperator(
            f"{name}-gpu-operator",
            platform_args.gpu_operator(cfg, release_after=(nic_cluster_policy.policy,), gate=mig_gate),
            cluster_opts,
        )
        # 7. Node labels selecting MIG and time-slicing configs (on-prem; AKS labels pools), after
        #    the ConfigMaps they name: MIG Manager fails a node whose label names no config.
        #    A MIG layout change waits on the day-2 guard (components/guards/mig.py).
        if cfg.onprem is not None:
            nodes = OnPremNodes(
                f"{name}-nodes",
                platform_args.onprem_nodes(cfg, gate=mig_gate),
                _after(cluster_opts, *gpu_operator.configs),
            )
            self._labelled.extend(nodes.patches.values())
        #    HAMi (node groups with hami), after the GPU Operator (its toolkit and RuntimeClass) and
        #    the labels that turn the Operator's device plugin off on HAMi nodes: two device
        #    plugins never advertise one node's GPUs.
        if hami.uses_hami(cfg):
            Hami(
                f"{name}-hami",
                platform_args.hami(cfg, release_after=(gpu_operator.release, *self._labelled)),
                cluster_opts,
            )
        # 8. SR-IOV host side and OpenSM partitions (on-prem), after the policy's NIC driver: VFs get
        #    their GUIDs, and the SM the member lists, before team NADs hand those VFs to pods.
        #    A change that moves VFs under running pods waits on the day-2 guard (components/guards/fabric.py).
        team_after: list[pulumi.Resource] = [nic_cluster_policy.policy]
        fabric: list[pulumi.CustomResource] = [nic_cluster_policy.policy]
        if cfg.onprem is not None:
            if cfg.onprem.fabric.vf_config == "daemonset":
                sriov_host = SriovHost(
                    f"{name}-sriov-host",
                    platform_args.sriov_host(cfg, gate=mig_gate),
                    _after(cluster_opts, nic_cluster_policy.policy),
                )
                team_after.append(sriov_host.daemonset)
                fabric.extend(sriov_host.plans)
            opensm = OpenSm(
                f"{name}-opensm",
                platform_args.opensm(cfg, gate=mig_gate),
                _after(cluster_opts, network_operator.namespace),
            )
            team_after.append(opensm.config_map)
            fabric.extend([*opensm.parts, opensm.config_map])
            self.exports["partitionsConf"] = opensm.partitions_conf
            self.exports["opensmConf"] = opensm.opensm_conf
        # 9. The admission guards on team pods (network annotations; partition on-prem, node pool on
        #    AKS), then 10. Teams: namespaces, quotas, RBAC, NADs (their CRD comes with the operator).
        #    The guards come first: they are cluster-scoped and select namespaces by label, so they
        #    need no namespace, and a quota or RoleBinding is safe only once they are in force —
        #    every team quota and RoleBinding depends on every guard (review 2026-12-01, item 3).
        #    That includes the queue guards (an elastic quota's ceiling lets a team hold borrowed
        #    GPUs: only through its queue) and the DRA claim guards (a quota's device entries let it
        #    claim GPUs: only of its classes, on its pool), so Queues and the DRA model register
        #    their cluster-scoped part here and their per-team part once the namespaces exist.
        admission = Admission(f"{name}-admission", platform_args.admission(cfg), cluster_opts)
        guards: list[pulumi.Resource] = list(admission.objects)
        #     Elastic quotas (components/queueing/queues.py): Kueue, its flavors and ClusterQueues, and
        #     the policies that send GPU workloads through the team queues.
        queues = Queues(f"{name}-queues", platform_args.queues(cfg), cluster_opts) if cfg.queues.elastic else None
        if queues is not None:
            guards.extend(queues.guards)
        #     DRA model: per-profile MIG classes and the claim guards.
        dra_tenancy = DraTenancy(f"{name}-dra", platform_args.dra(cfg), cluster_opts) if dra.uses_dra(cfg) else None
        if dra_tenancy is not None:
            guards.extend(dra_tenancy.guards)
        teams = Teams(
            f"{name}-teams",
            platform_args.teams(cfg, objects_after=tuple(team_after), guards=tuple(guards)),
            cluster_opts,
        )
        self.exports["teams"] = teams.exports
        #     Then what lives in the team namespaces: LocalQueues (before the verification Jobs use
        #     them), claim templates and the claims RoleBinding.
        after_teams: list[pulumi.Resource] = [teams]
        if queues is not None:
            queues.local_queues(teams.namespaces)
            after_teams.append(queues)
        if dra_tenancy is not None:
            dra_tenancy.add_team_objects(teams.namespaces)
            after_teams.append(dra_tenancy)
        #     Observability (components/observability/): the PrometheusRules, dashboards and Kueue's
        #     scrape, once the Prometheus stack's CRDs are read (their absence stops the run before any
        #     monitoring object); after Kueue's namespace, where its ServiceMonitor and token live.
        if cfg.observability.enabled:
            Observability(
                f"{name}-observability", platform_args.observability(cfg, kueue_after=tuple(after_teams)), cluster_opts
            )
        # 11. Verification workloads, last: they prove everything above. The Jobs run in the team
        #     namespaces, under their quotas, admission policies and with their NADs, so they come
        #     after the teams, their LocalQueues and claim templates (Verification forwards its
        #     depends_on to every child). Before, nothing ordered them (the SDK did not pass the
        #     component's depends_on on): a first run created them while the teams still waited for
        #     the Network Operator's first reconcile, and failed "namespaces not found" once that
        #     took longer than the provider's create retries (the real operator on the e2e fleet,
        #     issue 34; a real cluster first pulls the operator's image).
        verification = Verification(
            f"{name}-verification", platform_args.verification(cfg), _after(cluster_opts, *after_teams)
        )
        if verification.jobs:
            self.exports["verificationJobs"] = verification.jobs

        # Exported only once the labels carrying them are applied: a run the guard (or a failed
        # label update) stops must leave the last run's layouts in place for the next comparison.
        if dra.uses_dra(cfg):
            self.exports[resource_model.MODEL_OUTPUT] = mig_gate.apply(lambda _: "dra")
        self.exports[mig.OUTPUT] = gate.once_applied(mig_gate, self._labelled, mig.mig_layouts(cfg))
        version = version_guard.recorded(cfg)
        if version is not None:
            self.exports[version_guard.OUTPUT] = gate.once_applied(mig_gate, self._versioned, version)
        if cfg.onprem is not None:
            self.exports[mig.NODE_OUTPUT] = gate.once_applied(mig_gate, self._labelled, mig.node_layouts(cfg))
            self.exports[fabric_guard.OUTPUT] = gate.once_applied(mig_gate, fabric, fabric_guard.fabric_layout(cfg))
        self.register_outputs(self.exports)

    def _mig_gate(self, name: str, cfg: StackConfig) -> pulumi.Output[bool]:
        """The day-2 guards over this stack's own last outputs (a StackReference to itself).

        Resolves to ``True``, or fails the run with the config-error text, every guard's problems
        together: a node group's MIG layout changes without ``mig.reconfigure: true``
        (:mod:`components.guards.mig`; node labels wait on it), or a fabric change moves VFs under
        running pods without its acknowledgement (:mod:`components.guards.fabric`; the GUID plan,
        P_Key table, partitions.conf and NicClusterPolicy wait on it), or an AKS version change skips a
        minor or goes back (:mod:`components.guards.kubernetes_version`; the cluster and pools wait on it).
        """
        me = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
        last_run = pulumi.StackReference(f"{name}-last-run", stack_name=me, opts=pulumi.ResourceOptions(parent=self))
        names = (mig.OUTPUT, mig.NODE_OUTPUT, fabric_guard.OUTPUT, resource_model.MODEL_OUTPUT, version_guard.OUTPUT)
        last = pulumi.Output.all(*[last_run.get_output(n) for n in names])
        # First the resource-model guard (a running stack keeps its model, components/model/dra.py): a
        # model switch is the news, and the other guards' view of it would only repeat it per group.
        return last.apply(
            lambda o: (
                resource_model.enforce_model(cfg, o[0], o[3])
                and gate.stop_on(
                    [
                        mig.check(cfg, *mig.last_maps(o[0], o[1])),
                        fabric_guard.check(cfg, gate.string_map(fabric_guard.OUTPUT, o[2])),
                        version_guard.check(cfg, {mig.OUTPUT: o[0], version_guard.OUTPUT: o[4]}, self._today),
                    ]
                )
            )
        )

    def _cluster(self, name: str, cfg: StackConfig, mig_gate: pulumi.Output[bool]) -> k8s.Provider:
        onprem = cfg.onprem
        if onprem is not None:
            return k8s.Provider(
                f"{name}-k8s",
                context=onprem.kubeconfig_context,
                enable_server_side_apply=True,
                opts=pulumi.ResourceOptions(parent=self),
            )
        aks = f"{name}-aks"
        cluster = AksCluster(aks, platform_args.aks_cluster(cfg, mig_gate), pulumi.ResourceOptions(parent=self))
        if cluster.cluster is not None:
            self._versioned.append(cluster.cluster)
            # The ND pools are the cluster's children (their URNs, and the plan's "aks" component), after
            # the subscription's InfiniBand feature; an existing cluster's pools exist already.
            after = [cluster.infiniband_feature] if cluster.infiniband_feature is not None else []
            pools = platform_args.aks_nd_pools(
                cfg, mig_gate, resource_group_name=cluster.resource_group_name, cluster_name=cluster.cluster_name
            )
            for pool in pools:
                nd_pool = AksNdPool(
                    f"{aks}-{pool.pool_name}", pool, pulumi.ResourceOptions(parent=cluster, depends_on=after)
                )
                self._labelled.append(nd_pool.agent_pool)
                self._versioned.append(nd_pool.agent_pool)
        self.exports["clusterName"] = cluster.cluster_name
        self.exports["kubeconfig"] = cluster.kubeconfig  # secret: the credential call's kubeconfig
        return cluster.provider
