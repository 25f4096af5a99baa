"""Rules of the platform: node groups, nodes and the GUID scheme on-prem; pools and the System pool on AKS."""

from __future__ import annotations

from collections.abc import Iterator

from components.model import resources
from components.model.catalog import ND_SKUS
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.platform import AksPlatform, OnPremPlatform
from components.rules.common import config_key, dupes


def _platform(cfg: StackConfig) -> Iterator[Issue]:
    p = cfg.platform
    if isinstance(p, OnPremPlatform):
        yield from _onprem(p)
    else:
        yield from _aks(p)


def _onprem(p: OnPremPlatform) -> Iterator[Issue]:
    for dup in dupes([g.name for g in p.node_groups]):
        i = [g.name for g in p.node_groups].index(dup)
        yield Issue(config_key(f"platform.nodeGroups[{i}]", "name"), f"duplicate node group {dup!r}")
    names = [n.name for n in p.nodes]
    # Each name's and id's first node, found once: counting per node was quadratic (1.3 s at 8000 nodes; issue 37).
    first_name: dict[str, int] = {}
    first_id: dict[int, int] = {}
    scheme = p.fabric.guid_scheme
    for i, n in enumerate(p.nodes):
        if first_name.setdefault(n.name, i) != i:
            yield Issue(config_key(f"platform.nodes[{i}]", "name"), f"duplicate node {n.name!r}")
        if (first := first_id.setdefault(n.id, i)) != i:
            yield Issue(
                config_key(f"platform.nodes[{i}]", "id"),
                f"{n.id} is already the id of {names[first]!r}; node ids must be unique (they seed VF GUIDs)",
            )
        if n.id >= 1 << scheme.node_bits:
            yield Issue(
                config_key(f"platform.nodes[{i}]", "id"),
                f"{n.id} does not fit guidScheme.nodeBits={scheme.node_bits} "
                f"(allowed 0..{(1 << scheme.node_bits) - 1})",
            )
        if n.node_group not in p.groups_by_name:
            yield Issue(
                config_key(f"platform.nodes[{i}]", "nodeGroup"),
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
        for dup in dupes(list(g.hcas)):
            yield Issue(config_key(f"platform.nodeGroups[{i}]", "hcas"), f"duplicate HCA {dup!r}")
    sm = f.opensm
    if sm.deploy_in_cluster and sm.node is None:
        yield Issue("gpuaas:platform.fabric.opensm.node", "is required when deployInCluster is true")
    if sm.node is not None and sm.node not in first_name:
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
    first_pool: dict[str, int] = {}
    for i, pool in enumerate(p.gpu_pools):
        where = f"platform.gpuPools[{i}]"
        for key in sorted(set(pool.labels) & resources.OWNED_NODE_LABELS):
            yield Issue(
                config_key(where, f'labels["{key}"]'),
                f"{pool.labels[key]!r}: gpuaas sets this label from the pool's name and GPU sharing; remove it",
            )
        if first_pool.setdefault(pool.name, i) != i or pool.name == sp.name:
            yield Issue(config_key(where, "name"), f"duplicate pool name {pool.name!r}")
        sku = ND_SKUS.get(pool.vm_size)
        ib = sorted(s.vm_size for s in ND_SKUS.values() if s.ib_gbps_per_gpu)
        if sku is None:
            yield Issue(config_key(where, "vmSize"), f"unknown GPU VM size {pool.vm_size!r}; allowed: {', '.join(ib)}")
        elif not sku.ib_gbps_per_gpu:
            yield Issue(
                config_key(where, "vmSize"),
                f"{pool.vm_size} has no InfiniBand (not an RDMA 'r' size); allowed: {', '.join(ib)}",
            )
        if pool.min_count > pool.max_count:
            yield Issue(config_key(where, "minCount"), f"{pool.min_count} is above maxCount {pool.max_count}")
        if pool.max_count > 100:
            yield Issue(
                config_key(where, "maxCount"),
                f"{pool.max_count}: one InfiniBand placement group holds at most 100 VMs by default",
            )


def check(cfg: StackConfig) -> Iterator[Issue]:
    """Every platform problem: on-prem nodes, groups and GUID scheme, or AKS pools; AKS autoscaling names."""
    yield from _platform(cfg)
    yield from _autoscaler_names(cfg)
