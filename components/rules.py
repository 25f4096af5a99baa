"""Cross-field rules of a stack config, and the fleet capacity that quotas are checked against.

Pure functions on a structurally valid :class:`StackConfig`. Each rule yields :class:`Issue`s
naming the key the user edits; :func:`check` runs them all so every problem surfaces at once.
"""

from __future__ import annotations

import ipaddress
from collections import Counter, defaultdict
from collections.abc import Iterator

from components import resources
from components.catalog import GPU_MODELS, ND_SKUS
from components.config import (
    AksPartition,
    AksPlatform,
    GpuSharing,
    OnPremPartition,
    OnPremPlatform,
    StackConfig,
)
from components.errors import Issue
from components.mig import LayoutError, check_layout, parse_layout
from components.multus import NETWORK_NAME as MULTUS_NETWORK
from components.names import namespace_collisions, proof_name_collisions
from components.types import format_pkey

#: Namespaces a team may not take: the cluster's own and the platform's operators.
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
#: The device-plugin config of nodes without an ``nvidia.com/device-plugin.config`` label; the
#: other keys are node-group names (:func:`components.gpu_operator.device_plugin_config_name`).
DEVICE_PLUGIN_DEFAULT_CONFIG = "default"


def check(cfg: StackConfig) -> list[Issue]:
    """Every cross-field problem of ``cfg``, sorted by path."""
    issues: list[Issue] = []
    for rule in (
        _teams,
        _platform,
        _sharing,
        _partitions,
        _proofs,
        _node_labels,
        _autoscaler_names,
        namespace_collisions,
        proof_name_collisions,
    ):
        issues.extend(rule(cfg))
    from components.dra_rules import dra_issues, replaced_by_dra  # the DRA model's rules build on this module

    issues.extend(dra_issues(cfg))
    if not any(".mig." in i.path or i.path.endswith(".nodeGroup") for i in issues):
        # Capacity needs valid layouts and node groups; otherwise those issues are the news.
        issues.extend(i for i in _quotas(cfg) if not replaced_by_dra(cfg, i))
        from components import elastic  # it builds on this module's capacity functions

        issues.extend(elastic.check(cfg))
    return sorted(set(issues))


# --------------------------------------------------------------------------------------------
# Sharing / MIG


def sharing_groups(cfg: StackConfig) -> list[tuple[str, str, GpuSharing, str]]:
    """``(config path, group name, sharing, gpu model)`` for every node group or GPU pool."""
    if isinstance(cfg.platform, OnPremPlatform):
        return [(f"platform.nodeGroups[{i}]", g.name, g, g.gpu_model) for i, g in enumerate(cfg.platform.node_groups)]
    return [(f"platform.gpuPools[{i}]", p.name, p, p.gpu_model) for i, p in enumerate(cfg.platform.gpu_pools)]


def mig_counts(sharing: GpuSharing, gpu_model: str) -> dict[str, int]:
    """Profile counts per GPU of a group (``{}`` = MIG off). Assumes :func:`check` passed."""
    gpu = GPU_MODELS[gpu_model]
    if sharing.mig.profiles is not None:
        return dict(sharing.mig.profiles)
    if sharing.mig.layout is not None:
        return parse_layout(sharing.mig.layout, gpu)
    return {}


def layout_name(sharing: GpuSharing) -> str:
    """The mig-parted config name a group's nodes are labelled with (``nvidia.com/mig.config``).

    ``+`` is written ``.`` (``1g.10gb+me`` → ``1g.10gb.me``), as in mig-parted's own
    ``all-1g.10gb.me``: a label value allows only alphanumerics, ``-``, ``_`` and ``.``.
    """
    if sharing.mig.layout is not None:
        name = sharing.mig.layout
    elif sharing.mig.profiles:
        name = "-".join(f"{n}x{p}" for p, n in sorted(sharing.mig.profiles.items()))
    else:
        name = "all-disabled"
    return name.replace("+", ".")


def _sharing(cfg: StackConfig) -> Iterator[Issue]:
    seen_layouts: dict[str, tuple[str, str, dict[str, int]]] = {}
    for where, name, sharing, model in sharing_groups(cfg):
        if name == DEVICE_PLUGIN_DEFAULT_CONFIG and sharing.time_slicing is not None:
            yield Issue(
                _p(where, "name"),
                f"{name!r} is the device-plugin config of unlabelled nodes, so it cannot be time-sliced; "
                "rename the group",
            )
        gpu = GPU_MODELS.get(model)
        if gpu is None:
            continue  # reported by the model (on-prem) or the SKU rule (AKS)
        key = "layout" if sharing.mig.layout is not None else "profiles"
        try:
            counts = mig_counts(sharing, model)
            check_layout(counts, gpu)
        except LayoutError as e:
            value = sharing.mig.layout if key == "layout" else sharing.mig.profiles
            yield Issue(_p(where, "mig", key), f"{value!r}: {e}")
            continue
        label = layout_name(sharing)
        if len(label) > 63:
            yield Issue(
                _p(where, "mig", key),
                f"{label!r} is {len(label)} characters; the nvidia.com/mig.config label value allows 63: "
                "use fewer distinct profiles",
            )
        # One mig-parted config name holds one layout (devices: all), so a name such as
        # all-balanced may not mean different profiles on two GPU models.
        first = seen_layouts.setdefault(label, (where, model, counts))
        if first[2] != counts:
            yield Issue(
                _p(where, "mig", key),
                f"{label!r} is {counts} on {model} but {first[2]} on {first[1]} ({first[0]}); one MIG config "
                "name is one layout: write mig.profiles for one of the groups",
            )
        if counts and sharing.time_slicing is not None:
            yield Issue(
                _p(where, "timeSlicing"),
                "time-slicing and a MIG layout on one node group are not supported; "
                "use a separate node group for time-sliced GPUs",
            )
        if counts and cfg.gpu_operator.mig_strategy == "single" and len(counts) > 1:
            yield Issue(
                _p(where, "mig", key),
                f"{layout_name(sharing)!r} mixes profiles; gpuOperator.migStrategy single allows one profile "
                "per node (set gpuaas:gpuOperator.migStrategy: mixed)",
            )


def _p(where: str, *rest: str) -> str:
    return "gpuaas:" + ".".join([where, *rest])


# --------------------------------------------------------------------------------------------
# Platform


def _platform(cfg: StackConfig) -> Iterator[Issue]:
    p = cfg.platform
    if isinstance(p, OnPremPlatform):
        yield from _onprem(p)
    else:
        yield from _aks(p)


def _dupes(values: list[str]) -> set[str]:
    return {v for v, n in Counter(values).items() if n > 1}


def _onprem(p: OnPremPlatform) -> Iterator[Issue]:
    for dup in _dupes([g.name for g in p.node_groups]):
        i = [g.name for g in p.node_groups].index(dup)
        yield Issue(_p(f"platform.nodeGroups[{i}]", "name"), f"duplicate node group {dup!r}")
    names = [n.name for n in p.nodes]
    ids = [n.id for n in p.nodes]
    scheme = p.fabric.guid_scheme
    for i, n in enumerate(p.nodes):
        if names.count(n.name) > 1 and names.index(n.name) != i:
            yield Issue(_p(f"platform.nodes[{i}]", "name"), f"duplicate node {n.name!r}")
        if ids.count(n.id) > 1 and ids.index(n.id) != i:
            yield Issue(
                _p(f"platform.nodes[{i}]", "id"),
                f"{n.id} is already the id of {names[ids.index(n.id)]!r}; node ids must be unique (they seed VF GUIDs)",
            )
        if n.id >= 1 << scheme.node_bits:
            yield Issue(
                _p(f"platform.nodes[{i}]", "id"),
                f"{n.id} does not fit guidScheme.nodeBits={scheme.node_bits} "
                f"(allowed 0..{(1 << scheme.node_bits) - 1})",
            )
        if n.node_group not in p.groups_by_name:
            yield Issue(
                _p(f"platform.nodes[{i}]", "nodeGroup"),
                f"{n.node_group!r} is not a node group; allowed: {', '.join(p.groups_by_name) or '(none defined)'}",
            )
    f = p.fabric
    if f.vfs_per_hca > f.firmware_max_vfs:
        yield Issue(
            "gpuaas:platform.fabric.vfsPerHca",
            f"{f.vfs_per_hca} exceeds firmwareMaxVfs={f.firmware_max_vfs} (NUM_OF_VFS burnt into the HCA firmware)",
        )
    if f.vfs_per_hca > 1 << scheme.vf_bits:
        yield Issue(
            "gpuaas:platform.fabric.guidScheme.vfBits",
            f"{scheme.vf_bits} bits hold {1 << scheme.vf_bits} VF indices; vfsPerHca is {f.vfs_per_hca}",
        )
    max_hcas = max((len(g.hcas) for g in p.node_groups), default=0)
    if max_hcas > 1 << scheme.hca_bits:
        yield Issue(
            "gpuaas:platform.fabric.guidScheme.hcaBits",
            f"{scheme.hca_bits} bits hold {1 << scheme.hca_bits} HCAs; a node group has {max_hcas}",
        )
    low = scheme.node_bits + scheme.hca_bits + scheme.vf_bits
    if low > 56:
        yield Issue(
            "gpuaas:platform.fabric.guidScheme",
            f"nodeBits+hcaBits+vfBits = {low}; at most 56 so the base keeps its top byte",
        )
    elif scheme.base & ((1 << low) - 1):
        yield Issue(
            "gpuaas:platform.fabric.guidScheme.base",
            f"0x{scheme.base:016x} has bits set in the low {low} bits that node/HCA/VF indices use; "
            f"clear them (e.g. 0x{scheme.base & ~((1 << low) - 1):016x})",
        )
    for i, g in enumerate(p.node_groups):
        for dup in _dupes(list(g.hcas)):
            yield Issue(_p(f"platform.nodeGroups[{i}]", "hcas"), f"duplicate HCA {dup!r}")
    sm = f.opensm
    if sm.deploy_in_cluster and sm.node is None:
        yield Issue("gpuaas:platform.fabric.opensm.node", "is required when deployInCluster is true")
    if sm.node is not None and sm.node not in names:
        yield Issue("gpuaas:platform.fabric.opensm.node", f"{sm.node!r} is not one of platform.nodes")


def _autoscaler_names(cfg: StackConfig) -> Iterator[Issue]:
    """AKS pools that scale from zero need a resource name the autoscaler's node template can hold."""
    p, net = cfg.aks, cfg.network
    if p is None or net.rdma_shared_device_plugin == "none":
        return
    empty = [pool.name for pool in p.gpu_pools if pool.min_count == 0]
    for key, value in (("rdmaResourceName", net.rdma_resource_name), ("rdmaResourcePrefix", net.rdma_resource_prefix)):
        if empty and "_" in value:
            yield Issue(
                f"gpuaas:network.{key}",
                f"{value!r} has '_', which the cluster autoscaler reads as '/' in a node-template tag, so pools "
                f"{', '.join(empty)} (minCount 0) would never scale up for RDMA pods; use letters and digits "
                "(e.g. hcashared), or minCount >= 1 on those pools",
            )


def _aks(p: AksPlatform) -> Iterator[Issue]:
    sp = p.system_pool
    if sp.min_count < 1:
        yield Issue(
            "gpuaas:platform.systemPool.minCount",
            f"{sp.min_count}: the System pool cannot scale to zero (allowed 1..{sp.max_count})",
        )
    if sp.min_count > sp.max_count:
        yield Issue("gpuaas:platform.systemPool.minCount", f"{sp.min_count} is above maxCount {sp.max_count}")
    if p.existing_cluster and p.resource_group.create:
        yield Issue(
            "gpuaas:platform.resourceGroup.create",
            "true, but existingCluster is true: an existing cluster's resource group exists already; "
            "set resourceGroup.create: false",
        )
    names = [x.name for x in p.gpu_pools]
    for i, pool in enumerate(p.gpu_pools):
        where = f"platform.gpuPools[{i}]"
        for key in sorted(set(pool.labels) & resources.OWNED_NODE_LABELS):
            yield Issue(
                _p(where, f'labels["{key}"]'),
                f"{pool.labels[key]!r}: gpuaas sets this label from the pool's name and GPU sharing; remove it",
            )
        if pool.name == sp.name or (names.count(pool.name) > 1 and names.index(pool.name) != i):
            yield Issue(_p(where, "name"), f"duplicate pool name {pool.name!r}")
        sku = ND_SKUS.get(pool.vm_size)
        ib = sorted(s.vm_size for s in ND_SKUS.values() if s.ib_gbps_per_gpu)
        if sku is None:
            yield Issue(_p(where, "vmSize"), f"unknown GPU VM size {pool.vm_size!r}; allowed: {', '.join(ib)}")
        elif not sku.ib_gbps_per_gpu:
            yield Issue(
                _p(where, "vmSize"),
                f"{pool.vm_size} has no InfiniBand (not an RDMA 'r' size); allowed: {', '.join(ib)}",
            )
        if pool.min_count > pool.max_count:
            yield Issue(_p(where, "minCount"), f"{pool.min_count} is above maxCount {pool.max_count}")
        if pool.max_count > 100:
            yield Issue(
                _p(where, "maxCount"),
                f"{pool.max_count}: one InfiniBand placement group holds at most 100 VMs by default",
            )


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
# Teams and partitions


def _teams(cfg: StackConfig) -> Iterator[Issue]:
    seen_names: dict[str, int] = {}
    seen_ns: dict[str, int] = {}
    for i, t in enumerate(cfg.teams):
        if t.name in seen_names:
            yield Issue(_p(f"teams[{i}]", "name"), f"duplicate team {t.name!r} (also teams[{seen_names[t.name]}])")
        seen_names.setdefault(t.name, i)
        key = "namespace" if t.namespace is not None else "name"
        if t.ns in seen_ns:
            yield Issue(
                _p(f"teams[{i}]", key),
                f"namespace {t.ns!r} is already used by teams[{seen_ns[t.ns]}]; every team needs its own",
            )
        seen_ns.setdefault(t.ns, i)
        if t.ns in RESERVED_NAMESPACES or t.ns.startswith("kube-"):  # operator ones: components/names.py
            yield Issue(_p(f"teams[{i}]", key), f"namespace {t.ns!r} is reserved for the cluster or its operators")
        if t.verify and t.partition is None:
            yield Issue(_p(f"teams[{i}]", "verify"), "the verification proofs need a partition on the team")


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
                yield Issue(_p(where), "a P_Key partition needs platform kind onprem; on AKS write {nodePool: <pool>}")
                continue
            if part.pkey in by_pkey:
                other = by_pkey[part.pkey]
                yield Issue(
                    _p(where, "pkey"),
                    f"{format_pkey(part.pkey)} is already the partition of {cfg.teams[other].name!r} "
                    f"(teams[{other}]); P_Keys are unique however written (1, 0x1, 0x8001)",
                )
            by_pkey.setdefault(part.pkey, i)
            vfs = p.fabric.vfs_per_hca
            if part.vf_index >= vfs:
                yield Issue(
                    _p(where, "vfIndex"),
                    f"{part.vf_index} is beyond the {vfs} VFs per HCA (allowed 0..{vfs - 1}; raising "
                    "platform.fabric.vfsPerHca adds VFs but re-creates every VF of every node: drain the RDMA "
                    "nodes and set platform.fabric.reconfigure: true for that run)",
                )
            elif part.vf_index in by_vf:
                other = by_vf[part.vf_index]
                yield Issue(
                    _p(where, "vfIndex"),
                    f"VF {part.vf_index} is already bound to {cfg.teams[other].name!r} (teams[{other}]); "
                    "a VF's GUID can be in one partition only",
                )
            by_vf.setdefault(part.vf_index, i)
        elif isinstance(part, AksPartition):
            if not isinstance(p, AksPlatform):
                yield Issue(_p(where), "a node-pool partition needs platform kind aks; on-prem write {pkey, vfIndex}")
                continue
            if part.node_pool not in p.pools_by_name:
                yield Issue(
                    _p(where, "nodePool"),
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
                        _p(f"teams[{i}].partition", "nodePool"),
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
            "devices; use daemonset (see components/sriov_host.py)",
        )
    if f.ipam == "nv-ipam":
        yield from _nv_ipam(cfg, p)
    yield from _infrastructure(cfg, p)
    from components.sriov_host import MAX_PLAN_BYTES, node_plan_bound, shard_size

    for i, g in enumerate(p.node_groups):
        if not shard_size(g):
            yield Issue(
                _p(f"platform.nodeGroups[{i}]", "hcas"),
                f"one node's VF GUID plan ({len(g.hcas)} HCAs) can take {node_plan_bound(g)} bytes; a ConfigMap "
                f"holds at most {MAX_PLAN_BYTES}. List fewer HCAs",
            )


def _infrastructure(cfg: StackConfig, p: OnPremPlatform) -> Iterator[Issue]:
    """The hosts' partition: its own P_Key and name, PF ports only, each once."""
    from components.guids import vf_owner

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


def _nv_ipam(cfg: StackConfig, p: OnPremPlatform) -> Iterator[Issue]:
    """nv-ipam: one /24 of ``ipamSupernet`` per team, the P_Key-th, with one address per HCA per node."""
    f = p.fabric
    try:
        supernet = ipaddress.IPv4Network(f.ipam_supernet)
    except ValueError as e:
        yield Issue("gpuaas:platform.fabric.ipamSupernet", f"{f.ipam_supernet!r} is not an IPv4 network ({e})")
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
                _p(f"teams[{i}].partition", "pkey"),
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


# --------------------------------------------------------------------------------------------
# Capacity and quotas


def node_counts(cfg: StackConfig) -> dict[str, int]:
    """Nodes per node group (on-prem) or maximum nodes per GPU pool (AKS)."""
    p = cfg.platform
    if isinstance(p, OnPremPlatform):
        counts: dict[str, int] = defaultdict(int)
        for n in p.nodes:
            counts[n.node_group] += 1
        return {g.name: counts[g.name] for g in p.node_groups}
    return {pool.name: pool.max_count for pool in p.gpu_pools}


def gpus_per_node(cfg: StackConfig, group: str) -> int:
    p = cfg.platform
    if isinstance(p, OnPremPlatform):
        return p.groups_by_name[group].gpus_per_node
    sku = ND_SKUS.get(p.pools_by_name[group].vm_size)
    return sku.gpus if sku else 0


def group_capacity(cfg: StackConfig, group: str, sharing: GpuSharing, model: str) -> dict[str, int]:
    """Extended resources one node group adds to the fleet, by resource name."""
    gpus = node_counts(cfg).get(group, 0) * gpus_per_node(cfg, group)
    out: dict[str, int] = defaultdict(int)
    counts = mig_counts(sharing, model) if model in GPU_MODELS else {}
    if counts:
        for profile, n in counts.items():
            name = resources.GPU if cfg.gpu_operator.mig_strategy == "single" else resources.mig_resource(profile)
            out[name] += gpus * n
    elif sharing.time_slicing is not None:
        out[resources.GPU_SHARED] += gpus * sharing.time_slicing.replicas
    else:
        out[resources.GPU] += gpus
    return dict(out)


def sriov_partitions(cfg: StackConfig) -> list[tuple[str, OnPremPartition]]:
    """``(team name, partition)`` of every on-prem team partition, sorted by team name."""
    return sorted(
        ((t.name, t.partition) for t in cfg.teams if isinstance(t.partition, OnPremPartition)),
        key=lambda item: item[0],
    )


def vfs_per_partition(cfg: StackConfig) -> int:
    """VFs (and so GUIDs) bound to one partition on-prem: one per HCA of every node."""
    p = cfg.onprem
    if p is None:
        return 0
    return sum(len(p.groups_by_name[n.node_group].hcas) for n in p.nodes if n.node_group in p.groups_by_name)


def capacity(cfg: StackConfig) -> dict[str, int]:
    """What the whole fleet offers, per extended resource (GPUs, MIG instances, shares, RDMA)."""
    total: dict[str, int] = defaultdict(int)
    for _where, group, sharing, model in sharing_groups(cfg):
        for k, v in group_capacity(cfg, group, sharing, model).items():
            total[k] += v
    if cfg.network.rdma_shared_device_plugin != "none":
        nodes = sum(node_counts(cfg).values())
        rdma = resources.rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name)
        total[rdma] += nodes * cfg.network.rdma_hca_max
    p = cfg.platform
    if isinstance(p, OnPremPlatform):
        vfs_per_index = vfs_per_partition(cfg)
        for t in cfg.teams:
            if isinstance(t.partition, OnPremPartition):
                total[resources.sriov_resource(t.partition.pkey)] = vfs_per_index
    return dict(total)


def team_requests(cfg: StackConfig, i: int) -> dict[str, int]:
    """Extended resources team ``i`` may request, as its ResourceQuota will cap them."""
    t = cfg.teams[i]
    q = t.quota
    out: dict[str, int] = {}
    if q.gpus:
        out[resources.GPU] = q.gpus
    if q.time_sliced_gpus:
        out[resources.GPU_SHARED] = q.time_sliced_gpus
    for profile, n in q.mig.items():
        if n:
            out[resources.mig_resource(profile)] = n
    if q.rdma:
        if isinstance(t.partition, OnPremPartition):
            out[resources.sriov_resource(t.partition.pkey)] = q.rdma
        else:
            out[resources.rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name)] = (
                q.rdma
            )
    return out


_QUOTA_KEY = {resources.GPU: "gpus", resources.GPU_SHARED: "timeSlicedGpus"}


def _quota_key(resource: str) -> str:
    if resource in _QUOTA_KEY:
        return _QUOTA_KEY[resource]
    if resource.startswith("nvidia.com/mig-"):
        return f'mig["{resource.removeprefix("nvidia.com/mig-")}"]'
    return "rdma"


def _quotas(cfg: StackConfig) -> Iterator[Issue]:
    cap = capacity(cfg)
    gpu_kinds = {r for _w, g, sh, m in sharing_groups(cfg) for r in group_capacity(cfg, g, sh, m)}
    offered_mig = {k.removeprefix("nvidia.com/mig-") for k in cap if k.startswith("nvidia.com/mig-")}
    demand: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, t in enumerate(cfg.teams):
        if t.quota.mig and cfg.gpu_operator.mig_strategy == "single":
            yield Issue(
                _p(f"teams[{i}].quota", "mig"),
                "per-profile MIG quotas need gpuOperator.migStrategy: mixed (single advertises MIG as nvidia.com/gpu)",
            )
            continue
        for profile in t.quota.mig:
            if profile not in offered_mig:
                yield Issue(
                    _p(f"teams[{i}].quota", f'mig["{profile}"]'),
                    f"no node group offers MIG profile {profile!r}; "
                    f"offered: {', '.join(sorted(offered_mig)) or '(none)'}",
                )
        if t.quota.rdma and t.partition is None and cfg.network.rdma_shared_device_plugin == "none":
            yield Issue(_p(f"teams[{i}].quota", "rdma"), "no RDMA resource exists: no partition and no shared plugin")
        elif t.quota.rdma and t.partition is None and any(o.partition is not None for o in cfg.teams):
            # The shared RDMA device of a partitionless team reaches the fabric outside any team's
            # partition (on AKS: on whichever ND pool it lands, another team's partition); admission
            # refuses such pods too (components/admission.py pool policy), this says so before apply.
            yield Issue(
                _p(f"teams[{i}].quota", "rdma"),
                f"{t.quota.rdma}: a team without a partition may have no RDMA while other teams have partitions "
                "(its RDMA would share their fabric); allowed: 0, or give the team a partition",
            )
        for res, n in team_requests(cfg, i).items():
            demand[res].append((i, n))
    if cfg.quota_policy.allow_oversubscription:
        return
    for res, asks in sorted(demand.items()):
        if cfg.queues.elastic and res in gpu_kinds:
            continue  # elastic queues check the stricter per-node-group sums (components/elastic.py)
        total = sum(n for _, n in asks)
        have = cap.get(res, 0)
        if res.startswith("nvidia.com/mig-") and res.removeprefix("nvidia.com/mig-") not in offered_mig:
            continue  # reported above
        if total > have:
            who = ", ".join(f"{cfg.teams[i].name} {n}" for i, n in asks)
            where = f"teams[{asks[0][0]}].quota" if len(asks) == 1 else "teams[*].quota"
            yield Issue(
                _p(where, _quota_key(res)),
                f"teams ask for {total} {res} ({who}); the fleet has {have}. Lower the quotas or set "
                "gpuaas:quotaPolicy.allowOversubscription: true",
            )


# --------------------------------------------------------------------------------------------
# Proofs (verification)


def isolation_domains(cfg: StackConfig) -> dict[str, str]:
    """Every place a proof can run, by target key, with the partition it is in.

    A team with a partition (on-prem: its P_Key; on AKS: its ND pool, which Azure gives one partition
    per VMSS) and, with ``verification.aksPools``, ``pool-<pool>`` per GPU pool. Two keys with the same
    value share a partition: a probe between them would connect.
    """
    out: dict[str, str] = {}
    pools = {pool.name for pool in cfg.aks.gpu_pools} if cfg.aks is not None else set()
    for t in cfg.teams:
        part = t.partition
        if isinstance(part, OnPremPartition) and cfg.onprem is not None:
            out[t.name] = f"P_Key {format_pkey(part.pkey)}"
        elif isinstance(part, AksPartition) and part.node_pool in pools:
            out[t.name] = f"pool {part.node_pool}"
    if cfg.aks is not None and cfg.verification.aks_pools:
        for pool in cfg.aks.gpu_pools:
            out[f"pool-{pool.name}"] = f"pool {pool.name}"
    return out


def _proofs(cfg: StackConfig) -> Iterator[Issue]:
    v = cfg.versions
    if v.perftest is None and v.perftest_digest is None:
        yield Issue(
            _p("versions", "perftestDigest"),
            f"{v.perftest_image} needs a pin: a digest (sha256:…) or a tag in versions.perftest",
        )
    pairs = cfg.verification.isolation_pairs or []
    domains = isolation_domains(cfg)
    known = ", ".join(sorted(domains)) or "none: no team has a partition"
    seen: dict[tuple[str, str], int] = {}
    no_rdma = {t.name for t in cfg.teams if t.quota.rdma < 1}
    for i, pair in enumerate(pairs):
        where = f"verification.isolationPairs[{i}]"
        unknown = [role for role in ("client", "server") if getattr(pair, role) not in domains]
        for role in unknown:
            yield Issue(
                _p(where, role),
                f"{getattr(pair, role)!r} is not a target: a team with a partition, or pool-<pool> with "
                f"verification.aksPools (known: {known})",
            )
        if unknown:
            continue
        for role in ("client", "server"):
            if getattr(pair, role) in no_rdma:
                yield Issue(
                    _p(where, role),
                    f"team {getattr(pair, role)!r} has quota.rdma: 0, so its probe pod (one RDMA device) "
                    "would not be admitted; give the team quota.rdma of at least 1",
                )
        if domains[pair.client] == domains[pair.server]:
            yield Issue(
                _p(where, "server"),
                f"{pair.client!r} and {pair.server!r} are both in {domains[pair.client]}: "
                "a probe between them would connect; pick targets in two partitions",
            )
        key = (pair.client, pair.server)
        if key in seen:
            yield Issue(_p(where), f"the same probe as verification.isolationPairs[{seen[key]}]")
        seen.setdefault(key, i)
