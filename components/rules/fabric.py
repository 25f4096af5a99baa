"""Rules of the InfiniBand fabric: partitions, VF indices, Multus, IPAM, the hosts' partition, node labels."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from components.model import resources
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.guids import MAX_PLAN_BYTES, node_plan_bound, shard_size, vf_owner
from components.model.platform import AksPlatform, OnPremPlatform
from components.model.resources import MULTUS_NETWORK
from components.model.teams import AksPartition, OnPremPartition
from components.model.types import format_pkey
from components.rules.common import config_key
from components.rules.tenancy import RESERVED_NAMESPACES

# --------------------------------------------------------------------------------------------
# Who labels the RDMA nodes


MELLANOX_LABEL = resources.MELLANOX_LABEL


def _node_labels(cfg: StackConfig) -> Iterator[Issue]:
    """A stack that needs the Mellanox label has a rule that sets it (the chart's or gpuaas's)."""
    net = cfg.network
    if net.deploy_node_feature_rules or net.node_feature_rule:
        return
    needs = []
    if net.ofed_driver == "container":
        needs.append("ofedDriver: container (the DOCA driver DaemonSet selects on it)")
    if MELLANOX_LABEL in net.node_selector:
        needs.append("network.nodeSelector")
    if needs:
        yield Issue(
            "gpuaas:network.nodeFeatureRule",
            f"false while deployNodeFeatureRules is false too: no component labels Mellanox nodes "
            f"{MELLANOX_LABEL}, which {' and '.join(needs)} need(s); set nodeFeatureRule: true "
            "(gpuaas's InfiniBand rule) or deployNodeFeatureRules: true (the chart's)",
        )


# --------------------------------------------------------------------------------------------
# Partitions and the team networks


def _partitions(cfg: StackConfig) -> Iterator[Issue]:
    p = cfg.platform
    by_pkey: dict[int, int] = {}
    by_vf: dict[int, int] = {}
    for i, t in enumerate(cfg.teams):
        part = t.partition
        where = f"teams[{i}].partition"
        if part is None:
            continue
        if isinstance(part, OnPremPartition):
            if not isinstance(p, OnPremPlatform):
                yield Issue(
                    config_key(where), "a P_Key partition needs platform kind onprem; on AKS write {nodePool: <pool>}"
                )
                continue
            if part.pkey in by_pkey:
                other = by_pkey[part.pkey]
                yield Issue(
                    config_key(where, "pkey"),
                    f"{format_pkey(part.pkey)} is already the partition of {cfg.teams[other].name!r} "
                    f"(teams[{other}]); P_Keys are unique however written (1, 0x1, 0x8001)",
                )
            by_pkey.setdefault(part.pkey, i)
            vfs = p.fabric.vfs_per_hca
            if part.vf_index >= vfs:
                yield Issue(
                    config_key(where, "vfIndex"),
                    f"{part.vf_index} is beyond the {vfs} VFs per HCA (allowed 0..{vfs - 1}; raising "
                    "platform.fabric.vfsPerHca adds VFs but re-creates every VF of every node: drain the RDMA "
                    "nodes and set platform.fabric.reconfigure: true for that run)",
                )
            elif part.vf_index in by_vf:
                other = by_vf[part.vf_index]
                yield Issue(
                    config_key(where, "vfIndex"),
                    f"VF {part.vf_index} is already bound to {cfg.teams[other].name!r} (teams[{other}]); "
                    "a VF's GUID can be in one partition only",
                )
            by_vf.setdefault(part.vf_index, i)
        elif isinstance(part, AksPartition):
            if not isinstance(p, AksPlatform):
                yield Issue(
                    config_key(where), "a node-pool partition needs platform kind aks; on-prem write {pkey, vfIndex}"
                )
                continue
            if part.node_pool not in p.pools_by_name:
                yield Issue(
                    config_key(where, "nodePool"),
                    f"{part.node_pool!r} is not a GPU pool; allowed: {', '.join(p.pools_by_name) or '(none defined)'}",
                )
    yield from _team_networks(cfg)


def _team_networks(cfg: StackConfig) -> Iterator[Issue]:
    """What the team networks need: one partition per AKS pool; VF config, IPAM and GUID plan on-prem."""
    p = cfg.platform
    if isinstance(p, AksPlatform):
        pools: dict[str, int] = {}
        for i, t in enumerate(cfg.teams):
            if isinstance(t.partition, AksPartition):
                other = pools.setdefault(t.partition.node_pool, i)
                if other != i:
                    yield Issue(
                        config_key(f"teams[{i}].partition", "nodePool"),
                        f"{t.partition.node_pool!r} is already the partition of {cfg.teams[other].name!r} "
                        f"(teams[{other}]); an ND pool is one InfiniBand partition, so teams sharing it are not "
                        "isolated",
                    )
        return
    f = p.fabric
    first = next((i for i, t in enumerate(cfg.teams) if isinstance(t.partition, OnPremPartition)), None)
    if first is not None and p.multus is None:
        yield Issue(
            "gpuaas:platform.multus",
            f"is required once a team has a P_Key partition (teams[{first}]): gpuaas turns on Multus "
            "namespaceIsolation and must name the pods' primary network, e.g. {clusterNetwork: "
            "k8s-pod-network} for Calico, cilium for Cilium, cbr0 for Flannel (the 'name' in the CNI "
            "conf file under /etc/cni/net.d)",
        )
    if p.multus is not None and p.multus.cluster_network == MULTUS_NETWORK:
        yield Issue(
            "gpuaas:platform.multus.clusterNetwork",
            f"{MULTUS_NETWORK!r} is the Multus network itself; name the primary CNI's network",
        )
    if cfg.network.namespace in RESERVED_NAMESPACES:
        yield Issue(
            "gpuaas:network.namespace",
            f"{cfg.network.namespace!r} is reserved; Multus treats NADs of the Network Operator namespace as "
            "global, so it must be a namespace of its own (default: nvidia-network-operator)",
        )
    if f.vf_config == "sriov-network-operator":
        yield Issue(
            "gpuaas:platform.fabric.vfConfig",
            "sriov-network-operator is not supported yet: a per-partition VF pool needs a SriovNetworkNodePolicy "
            "selecting VF n of every PF by netdev name (pfNames 'ibp12s0#n-n'), and nodeGroups[].hcas name RDMA "
            "devices; use daemonset (see components/fabric/sriov_host.py)",
        )
    if f.ipam == "nv-ipam":
        yield from _nv_ipam(cfg, p)
    yield from _infrastructure(cfg, p)

    for i, g in enumerate(p.node_groups):
        if not shard_size(g):
            yield Issue(
                config_key(f"platform.nodeGroups[{i}]", "hcas"),
                f"one node's VF GUID plan ({len(g.hcas)} HCAs) can take {node_plan_bound(g)} bytes; a ConfigMap "
                f"holds at most {MAX_PLAN_BYTES}. List fewer HCAs",
            )


def _infrastructure(cfg: StackConfig, p: OnPremPlatform) -> Iterator[Issue]:
    """The hosts' partition: its own P_Key and name, PF ports only, each once."""

    infra = p.fabric.infrastructure
    if infra is None:
        return
    key = "gpuaas:platform.fabric.infrastructure"
    for i, t in enumerate(cfg.teams):
        if isinstance(t.partition, OnPremPartition) and t.partition.pkey == infra.pkey:
            yield Issue(
                f"{key}.pkey",
                f"{format_pkey(infra.pkey)} is already the partition of {t.name!r} (teams[{i}]); the hosts' "
                "partition needs a P_Key of its own",
            )
        if t.name == infra.name:
            yield Issue(f"{key}.name", f"{infra.name!r} is also a team's name (teams[{i}]); pick another")
    if not infra.ports:
        yield Issue(f"{key}.ports", "is empty: list the hosts' PF port GUIDs (ibstat -p on each host)")
    seen: set[int] = set()
    for j, guid in enumerate(infra.ports):
        if guid in seen:
            yield Issue(f"{key}.ports[{j}]", f"0x{guid:016x} is listed twice")
        seen.add(guid)
        owner = vf_owner(p, guid)
        if owner is not None:
            node, hca, vf = owner
            yield Issue(
                f"{key}.ports[{j}]",
                f"0x{guid:016x} is the GUID of VF {vf} on HCA {hca} of {node} (fabric.guidScheme): the hosts' "
                "partition holds PF ports only, never a team's VF",
            )


#: Ranges no pod interface may take an address from (RFC 6890 special-purpose registry): "this
#: network" (0.0.0.0/0 overlaps it, and every other range), loopback, link-local, multicast, and the
#: reserved class E with the limited broadcast.
_NOT_FOR_PODS = (
    ("0.0.0.0/8 ('this network')", ipaddress.IPv4Network("0.0.0.0/8")),
    ("127.0.0.0/8 (loopback)", ipaddress.IPv4Network("127.0.0.0/8")),
    ("169.254.0.0/16 (link-local)", ipaddress.IPv4Network("169.254.0.0/16")),
    ("224.0.0.0/4 (multicast)", ipaddress.IPv4Network("224.0.0.0/4")),
    ("240.0.0.0/4 (reserved, broadcast)", ipaddress.IPv4Network("240.0.0.0/4")),
)


def _nv_ipam(cfg: StackConfig, p: OnPremPlatform) -> Iterator[Issue]:
    """nv-ipam: one /24 of ``ipamSupernet`` per team, the P_Key-th, with one address per HCA per node."""
    f = p.fabric
    try:
        supernet = ipaddress.IPv4Network(f.ipam_supernet)
    except ValueError as e:
        yield Issue("gpuaas:platform.fabric.ipamSupernet", f"{f.ipam_supernet!r} is not an IPv4 network ({e})")
        return
    special = [name for name, net in _NOT_FOR_PODS if supernet.overlaps(net)]
    if special:
        yield Issue(
            "gpuaas:platform.fabric.ipamSupernet",
            f"{supernet} overlaps {', '.join(special)}: a team's VF addresses must be unicast addresses of a private "
            "range (e.g. 192.168.0.0/16 or a /16 of 10.0.0.0/8)",
        )
        return
    if supernet.prefixlen > 23:
        yield Issue(
            "gpuaas:platform.fabric.ipamSupernet",
            f"{supernet} has no room for one /24 per team P_Key; use a /23 or larger (e.g. 192.168.0.0/16)",
        )
        return
    slots = 1 << (24 - supernet.prefixlen)
    for i, t in enumerate(cfg.teams):
        if isinstance(t.partition, OnPremPartition) and t.partition.pkey >= slots:
            yield Issue(
                config_key(f"teams[{i}].partition", "pkey"),
                f"{format_pkey(t.partition.pkey)} has no /24 in ipamSupernet {supernet} (P_Keys 0x0001.."
                f"{format_pkey(slots - 1)} fit); pick a lower P_Key or a larger supernet",
            )
    block = max((len(g.hcas) for g in p.node_groups), default=1)
    if len(p.nodes) * block > 254:
        yield Issue(
            "gpuaas:platform.fabric.ipam",
            f"nv-ipam gives a team one /24 (254 addresses) and each node {block} of them; {len(p.nodes)} nodes "
            f"need {len(p.nodes) * block}. Use ipam: none (RDMA needs no address) or static",
        )


def check(cfg: StackConfig) -> Iterator[Issue]:
    """Every fabric problem: team partitions and networks, and who labels the RDMA nodes."""
    yield from _partitions(cfg)
    yield from _node_labels(cfg)
