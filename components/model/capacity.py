"""What the fleet offers and what each team asks for: the arithmetic quotas and queues are checked against.

Pure functions on a structurally valid :class:`StackConfig`: node groups and their sharing
(:func:`sharing_groups`, :func:`mig_counts`, :func:`layout_name`), extended resources per group
and fleet (:func:`group_capacity`, :func:`capacity`), a team's requests (:func:`team_requests`)
and the partitions proofs can run in (:func:`isolation_domains`). The rules
(:mod:`components.rules`), the components and the plan summary all read these, so a resource is
counted one way everywhere.
"""

from __future__ import annotations

from collections import defaultdict

from components.model import resources
from components.model.catalog import GPU_MODELS, ND_SKUS
from components.model.config import StackConfig
from components.model.memo import per_config_copied
from components.model.mig import parse_layout
from components.model.platform import OnPremPlatform
from components.model.sharing import GpuSharing
from components.model.teams import AksPartition, HamiQuota, OnPremPartition
from components.model.types import format_pkey, mebibytes

#: The device-plugin config of nodes without an ``nvidia.com/device-plugin.config`` label; the
#: other keys are node-group names (:func:`components.model.capacity.device_plugin_config_name`).
DEVICE_PLUGIN_DEFAULT_CONFIG = "default"


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


def device_plugin_config_name(group: str) -> str:
    """The device-plugin config key of a node group / GPU pool: its name.

    Keyed by group rather than by content, a group that starts or stops time-slicing changes only
    the ConfigMap, never its nodes' ``nvidia.com/device-plugin.config`` label.
    """
    return group


@per_config_copied(dict)
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


#: MiB in a GiB: the catalog states GPU memory in GiB, HAMi counts it in MiB.
MIB_PER_GIB = 1024


def mib(text: str) -> int:
    """A parsed memory quantity in whole MiB (the model checked it: :data:`components.model.types.MemoryMiB`)."""
    return mebibytes(text)


def hami_gpu_memory_mib(model: str, scaling: float) -> int:
    """The memory HAMi hands out per GPU of ``model``, in MiB: the catalog's size times ``memoryScaling``.

    The catalog's size is the marketing one (80 GiB for an H100-80GB); NVML reports a little less
    (81559 MiB), and HAMi registers what NVML reports, so a quota up to this bound fits on paper and
    one card's worth less in the last few hundred MiB of a fully booked node.
    """
    gpu = GPU_MODELS.get(model)
    return int(gpu.memory_gb * MIB_PER_GIB * scaling) if gpu is not None else 0


def hami_quota_requests(q: HamiQuota) -> dict[str, int]:
    """A team's HAMi quota by resource (slices, MiB, percent), zeros left out. Assumes the rules passed."""
    out = {resources.HAMI_GPU: q.gpus, resources.HAMI_MEMORY: mib(q.memory), resources.HAMI_CORES: q.cores}
    return {k: v for k, v in out.items() if v}


def group_capacity(cfg: StackConfig, group: str, sharing: GpuSharing, model: str) -> dict[str, int]:
    """Extended resources one node group adds to the fleet, by resource name.

    A HAMi group offers slices (``splitCount`` per GPU), their memory (MiB, see
    :func:`hami_gpu_memory_mib`) and SM share (100 per GPU). Only the slices are advertised on the
    node; memory and cores are what HAMi's scheduler extender books per GPU.
    """
    gpus = node_counts(cfg).get(group, 0) * gpus_per_node(cfg, group)
    out: dict[str, int] = defaultdict(int)
    counts = mig_counts(sharing, model) if model in GPU_MODELS else {}
    if sharing.hami is not None and not counts:
        out[resources.HAMI_GPU] += gpus * sharing.hami.split_count
        out[resources.HAMI_MEMORY] += gpus * hami_gpu_memory_mib(model, sharing.hami.memory_scaling)
        out[resources.HAMI_CORES] += gpus * 100
    elif counts:
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
    out.update(hami_quota_requests(q.hami))
    if q.rdma:
        if isinstance(t.partition, OnPremPartition):
            out[resources.sriov_resource(t.partition.pkey)] = q.rdma
        else:
            out[resources.rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name)] = (
                q.rdma
            )
    return out


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
