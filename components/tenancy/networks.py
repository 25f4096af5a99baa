"""A team's InfiniBand network: its NetworkAttachmentDefinitions and IPPool on-prem, its scheduling on AKS.

What each object is and why, with sources, is in :mod:`components.tenancy.teams`' docstring.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Final

from components import k8s as kube
from components.k8s import Manifest
from components.model import resources
from components.model.config import StackConfig
from components.model.teams import AksPartition, OnPremPartition, Team
from components.model.types import full_member_pkey
from components.tenancy.labels import AKS_POOL_LABEL, TEAM_LABEL, object_meta

#: ConfigMap with the scheduling defaults of an AKS team (a template for workloads; not read by admission).
SCHEDULING: Final = "gpuaas-scheduling"
#: NetworkAttachmentDefinition annotation tying a NAD to a device-plugin pool.
RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"


def nad_name(team: Team) -> str:
    """Name of the team's IB NetworkAttachmentDefinition (what pods put in their annotation)."""
    return f"ib-{team.name}"


def team_subnet(cfg: StackConfig, pkey: int) -> ipaddress.IPv4Network:
    """The /24 of ``fabric.ipamSupernet`` that partition ``pkey`` draws addresses from (the pkey-th)."""
    onprem = cfg.onprem
    if onprem is None:
        raise ValueError("team subnets exist on-prem only")
    supernet = ipaddress.IPv4Network(onprem.fabric.ipam_supernet)
    if supernet.prefixlen > 24 or pkey >= 1 << (24 - supernet.prefixlen):
        raise ValueError(f"{supernet} has no /24 number {pkey}")
    return ipaddress.IPv4Network((int(supernet.network_address) + (pkey << 8), 24))


def per_node_block(cfg: StackConfig) -> int:
    """Addresses nv-ipam reserves per node for one team: one per HCA (one team VF per HCA)."""
    onprem = cfg.onprem
    return max((len(g.hcas) for g in onprem.node_groups), default=1) if onprem else 1


def rdma_nad_name(team: Team) -> str:
    """The team's address-less NAD beside a ``static`` one: for pods that need no IP (the proofs)."""
    return f"ib-{team.name}-rdma"


def ipam(cfg: StackConfig, team: Team) -> dict[str, Any] | None:
    """The ``ipam`` section of the team NAD: none, ``static`` or ``nv-ipam`` with the team's pool.

    ``None`` (``fabric.ipam: none``) leaves ``ipam`` out: ib-sriov-cni runs IPAM only when
    ``ipam.type`` is set, and with an IPAM that returns no address it fails the sandbox ("IPAM
    plugin returned missing IP config", ib-sriov-cni v1.3.0 ``cmd/ib-sriov-cni/main.go``), which
    is what ``static`` does for a pod that lists no ``ips``.
    """
    onprem = cfg.onprem
    mode = onprem.fabric.ipam if onprem is not None else "none"
    if mode == "nv-ipam":
        return {"type": "nv-ipam", "poolName": nad_name(team)}
    if mode == "static":
        # Addresses per pod: "ips" in the network-selection annotation (the NAD declares the capability).
        return {"type": "static"}
    return None


def nad_config(cfg: StackConfig, team: Team, *, addresses: bool = True) -> dict[str, Any]:
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
    ipam_conf = ipam(cfg, team) if addresses else None
    if ipam_conf is not None:
        if ipam_conf["type"] == "static":
            conf["capabilities"] = {"ips": True}
        conf["ipam"] = ipam_conf
    return conf


def _nad(cfg: StackConfig, team: Team, addresses: bool) -> Manifest | None:
    part = team.partition
    if cfg.onprem is None or not isinstance(part, OnPremPartition):
        return None
    conf = nad_config(cfg, team, addresses=addresses)
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


def nad(cfg: StackConfig, team: Team) -> Manifest | None:
    """The team's ib-sriov NetworkAttachmentDefinition (on-prem partitions only)."""
    return _nad(cfg, team, addresses=True)


def rdma_nad(cfg: StackConfig, team: Team) -> Manifest | None:
    """With ``fabric.ipam: static``, the same network without IPAM: a pod that lists no ``ips``
    attaches to this one instead of failing its sandbox. ``None`` in the other modes, whose
    team NAD already works without addresses from the pod."""
    onprem = cfg.onprem
    if onprem is None or onprem.fabric.ipam != "static":
        return None
    return _nad(cfg, team, addresses=False)


def proof_network(cfg: StackConfig, team: Team) -> str:
    """The NAD the verification proofs attach: they need the VF, not an address on it.

    The proofs' pods carry no ``ips`` (two ranks of one Indexed Job share a template), so with
    ``static`` IPAM they use :func:`rdma_nad`; otherwise the team NAD.
    """
    return rdma_nad_name(team) if rdma_nad(cfg, team) is not None else nad_name(team)


def ip_pool(cfg: StackConfig, team: Team) -> Manifest | None:
    """The team's nv-ipam IPPool (``fabric.ipam: nv-ipam`` only), in the Network Operator namespace."""
    part = team.partition
    onprem = cfg.onprem
    if onprem is None or onprem.fabric.ipam != "nv-ipam" or not isinstance(part, OnPremPartition):
        return None
    return {
        "apiVersion": "nv-ipam.nvidia.com/v1alpha1",
        "kind": "IPPool",
        "metadata": object_meta(nad_name(team), cfg.network.namespace, labels={TEAM_LABEL: team.name}),
        "spec": {"subnet": str(team_subnet(cfg, part.pkey)), "perNodeBlockSize": per_node_block(cfg)},
    }


def scheduling(cfg: StackConfig, team: Team) -> dict[str, Any] | None:
    """nodeSelector and tolerations that put a pod of an AKS team on the team's ND pool."""
    aks = cfg.aks
    part = team.partition
    if aks is None or not isinstance(part, AksPartition) or part.node_pool not in aks.pools_by_name:
        return None
    pool = aks.pools_by_name[part.node_pool]
    return {
        "nodeSelector": {AKS_POOL_LABEL: pool.name},
        "tolerations": [kube.taint_toleration(t) for t in pool.taints],
    }


def scheduling_config_map(cfg: StackConfig, team: Team) -> Manifest | None:
    """The ``gpuaas-scheduling`` ConfigMap: the pool policy's parameter and the Jobs' template."""
    sched = scheduling(cfg, team)
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
