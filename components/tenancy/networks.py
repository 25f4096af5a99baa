"""A team's InfiniBand network: its NetworkAttachmentDefinitions and IPPool on-prem, its scheduling on AKS.

What each object is and why, with sources, is in :mod:`components.tenancy.teams`' docstring. The
renderers read :class:`PartitionNetworks` (on-prem, what every team's partition network is made of)
and the team, never the stack config: :class:`components.tenancy.teams.Teams` takes them as its
arguments (issue #33).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from components import k8s as kube
from components.k8s import Manifest
from components.model import resources
from components.model.capacity import vfs_per_partition
from components.model.config import StackConfig
from components.model.fabric import Fabric
from components.model.network import Network
from components.model.teams import AksPartition, OnPremPartition, Team
from components.model.types import full_member_pkey
from components.tenancy.labels import AKS_POOL_LABEL, TEAM_LABEL, object_meta

#: ConfigMap with the scheduling defaults of an AKS team (a template for workloads; not read by admission).
SCHEDULING: Final = "gpuaas-scheduling"
#: NetworkAttachmentDefinition annotation tying a NAD to a device-plugin pool.
RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"

#: The fabric's defaults (``platform.fabric``), one source for :class:`PartitionNetworks`'.
_FABRIC: Final = Fabric()


@dataclass(frozen=True, kw_only=True)
class PartitionNetworks:
    """On-prem: what every team partition's network is made of. A team with an on-prem partition gets its
    NAD from it (and with ``static`` IPAM the address-less twin, with ``nv-ipam`` its IPPool); where there
    is none (AKS: a partition is a node pool) no team gets a NAD."""

    ipam: Literal["none", "static", "nv-ipam"] = _FABRIC.ipam
    """IPAM of the team NADs (``platform.fabric.ipam``): ``none`` (no address on the VF), ``static`` (each pod
    lists its ``ips``) or ``nv-ipam`` (a pool per team); defaults to the fabric's ``none``."""
    ipam_supernet: str = _FABRIC.ipam_supernet
    """The subnet every team's nv-ipam pool is carved from, one /24 per team by P_Key
    (``platform.fabric.ipamSupernet``); defaults to the fabric's."""
    per_node_block: int = 1
    """Addresses nv-ipam reserves per node for one team: one per HCA, so the most HCAs of any node group;
    defaults to 1."""
    pool_namespace: str = Network().namespace
    """Where the IPPools live: the Network Operator's namespace, which nv-ipam watches (``gpuaas:network``);
    defaults to the Network Operator's default namespace."""
    vfs_per_partition: int = 0
    """VFs (and so GUIDs) bound to one partition, one per HCA of every node: the ``guidCount`` of the
    ``teams`` output; defaults to 0."""


def partition_networks(cfg: StackConfig) -> PartitionNetworks | None:
    """The stack's :class:`PartitionNetworks`: on-prem ``platform.fabric`` and its nodes; ``None`` off-prem."""
    onprem = cfg.onprem
    if onprem is None:
        return None
    return PartitionNetworks(
        ipam=onprem.fabric.ipam,
        ipam_supernet=onprem.fabric.ipam_supernet,
        per_node_block=max((len(g.hcas) for g in onprem.node_groups), default=1),
        pool_namespace=cfg.network.namespace,
        vfs_per_partition=vfs_per_partition(cfg),
    )


def nad_name(team: Team) -> str:
    """Name of the team's IB NetworkAttachmentDefinition (what pods put in their annotation)."""
    return f"ib-{team.name}"


def team_subnet(networks: PartitionNetworks, pkey: int) -> ipaddress.IPv4Network:
    """The /24 of ``fabric.ipamSupernet`` that partition ``pkey`` draws addresses from (the pkey-th)."""
    supernet = ipaddress.IPv4Network(networks.ipam_supernet)
    if supernet.prefixlen > 24 or pkey >= 1 << (24 - supernet.prefixlen):
        raise ValueError(f"{supernet} has no /24 number {pkey}")
    return ipaddress.IPv4Network((int(supernet.network_address) + (pkey << 8), 24))


def rdma_nad_name(team: Team) -> str:
    """The team's address-less NAD beside a ``static`` one: for pods that need no IP (the proofs)."""
    return f"ib-{team.name}-rdma"


def ipam(networks: PartitionNetworks | None, team: Team) -> dict[str, Any] | None:
    """The ``ipam`` section of the team NAD: none, ``static`` or ``nv-ipam`` with the team's pool.

    ``None`` (``fabric.ipam: none``) leaves ``ipam`` out: ib-sriov-cni runs IPAM only when
    ``ipam.type`` is set, and with an IPAM that returns no address it fails the sandbox ("IPAM
    plugin returned missing IP config", ib-sriov-cni v1.3.0 ``cmd/ib-sriov-cni/main.go``), which
    is what ``static`` does for a pod that lists no ``ips``.
    """
    mode = networks.ipam if networks is not None else "none"
    if mode == "nv-ipam":
        return {"type": "nv-ipam", "poolName": nad_name(team)}
    if mode == "static":
        # Addresses per pod: "ips" in the network-selection annotation (the NAD declares the capability).
        return {"type": "static"}
    return None


def nad_config(networks: PartitionNetworks | None, team: Team, *, addresses: bool = True) -> dict[str, Any]:
    """The ib-sriov CNI config of the team NAD (ib-sriov-cni README "Configuration reference").

    ``addresses=False``: the address-less variant (:func:`rdma_nad`).
    """
    part = team.partition
    if not isinstance(part, OnPremPartition):
        raise ValueError(f"team {team.name!r} has no on-prem partition")
    conf: dict[str, Any] = {
        "cniVersion": "0.3.1",
        "name": nad_name(team) if addresses else rdma_nad_name(team),
        "type": "ib-sriov",
        "pkey": full_member_pkey(part.pkey),
        "link_state": "enable",
        "ibKubernetesEnabled": False,
    }
    ipam_conf = ipam(networks, team) if addresses else None
    if ipam_conf is not None:
        if ipam_conf["type"] == "static":
            conf["capabilities"] = {"ips": True}
        conf["ipam"] = ipam_conf
    return conf


def _nad(networks: PartitionNetworks | None, team: Team, addresses: bool) -> Manifest | None:
    part = team.partition
    if networks is None or not isinstance(part, OnPremPartition):
        return None
    conf = nad_config(networks, team, addresses=addresses)
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": object_meta(
            conf["name"],
            team.ns,
            annotations={RESOURCE_NAME_ANNOTATION: resources.sriov_resource(part.pkey)},
        ),
        "spec": {"config": json.dumps(conf, indent=2)},
    }


def nad(networks: PartitionNetworks | None, team: Team) -> Manifest | None:
    """The team's ib-sriov NetworkAttachmentDefinition (on-prem partitions only)."""
    return _nad(networks, team, addresses=True)


def rdma_nad(networks: PartitionNetworks | None, team: Team) -> Manifest | None:
    """With ``fabric.ipam: static``, the same network without IPAM: a pod that lists no ``ips``
    attaches to this one instead of failing its sandbox. ``None`` in the other modes, whose
    team NAD already works without addresses from the pod."""
    if networks is None or networks.ipam != "static":
        return None
    return _nad(networks, team, addresses=False)


def proof_network(cfg: StackConfig, team: Team) -> str:
    """The NAD the verification proofs attach: they need the VF, not an address on it.

    The proofs' pods carry no ``ips`` (two ranks of one Indexed Job share a template), so with
    ``static`` IPAM they use :func:`rdma_nad`; otherwise the team NAD.
    """
    return rdma_nad_name(team) if rdma_nad(partition_networks(cfg), team) is not None else nad_name(team)


def ip_pool(networks: PartitionNetworks | None, team: Team) -> Manifest | None:
    """The team's nv-ipam IPPool (``fabric.ipam: nv-ipam`` only), in the Network Operator namespace."""
    part = team.partition
    if networks is None or networks.ipam != "nv-ipam" or not isinstance(part, OnPremPartition):
        return None
    return {
        "apiVersion": "nv-ipam.nvidia.com/v1alpha1",
        "kind": "IPPool",
        "metadata": object_meta(nad_name(team), networks.pool_namespace, labels={TEAM_LABEL: team.name}),
        "spec": {"subnet": str(team_subnet(networks, part.pkey)), "perNodeBlockSize": networks.per_node_block},
    }


def pool_taints(cfg: StackConfig, team: Team) -> tuple[str, ...] | None:
    """AKS: the taints of the team's ND pool (``platform.gpuPools[].taints``); ``None`` without one."""
    aks = cfg.aks
    part = team.partition
    if aks is None or not isinstance(part, AksPartition) or part.node_pool not in aks.pools_by_name:
        return None
    return tuple(aks.pools_by_name[part.node_pool].taints)


def scheduling(team: Team, taints: tuple[str, ...] | None) -> dict[str, Any] | None:
    """nodeSelector and tolerations that put a pod of an AKS team on the team's ND pool, whose taints are
    ``taints`` (:func:`pool_taints`); ``None`` where the team has no pool."""
    part = team.partition
    if taints is None or not isinstance(part, AksPartition):
        return None
    return {
        "nodeSelector": {AKS_POOL_LABEL: part.node_pool},
        "tolerations": [kube.taint_toleration(t) for t in taints],
    }


def scheduling_config_map(team: Team, taints: tuple[str, ...] | None) -> Manifest | None:
    """The ``gpuaas-scheduling`` ConfigMap: the pool policy's parameter and the Jobs' template."""
    sched = scheduling(team, taints)
    if sched is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(SCHEDULING, team.ns),
        "data": {
            "nodeSelectorKey": AKS_POOL_LABEL,
            "nodeSelectorValue": sched["nodeSelector"][AKS_POOL_LABEL],
            "pod-spec.json": json.dumps(sched, indent=2, sort_keys=True),
        },
    }
