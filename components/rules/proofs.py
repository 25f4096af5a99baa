"""Rules of the verification proofs: a pinned perftest image, isolation pairs that can be probed,
and proof pairs that some two nodes can hold."""

from __future__ import annotations

from collections.abc import Iterator

from components.model.capacity import group_capacity, isolation_domains, node_counts, sharing_groups
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.resources import GPU
from components.model.teams import AksPartition, OnPremPartition
from components.rules.common import config_key


def _whole_gpu_nodes(cfg: StackConfig) -> dict[str, int]:
    """Nodes (AKS: at most) per group or pool that advertise ``nvidia.com/gpu``, the NCCL pods' GPU."""
    counts = node_counts(cfg)
    out: dict[str, int] = {}
    for _where, name, sharing, gpu in sharing_groups(cfg):
        try:
            offers = group_capacity(cfg, name, sharing, gpu)
        except (KeyError, ValueError):
            continue  # a bad layout or GPU model is reported by the sharing rules
        if offers.get(GPU):
            out[name] = counts.get(name, 0)
    return out


def _pairs(cfg: StackConfig) -> Iterator[Issue]:
    """Each proof is a pair of pods on two nodes (required anti-affinity): a target whose nodes can
    never be two would leave its Jobs Pending until their deadline fails them. ib_write_bw needs two
    nodes with the team's RDMA device; NCCL two with a whole GPU each (``nvidia.com/gpu``: a MIG group
    under ``mixed`` or a time-sliced group has none)."""
    whole = _whole_gpu_nodes(cfg)
    onprem, aks = cfg.onprem, cfg.aks
    where_nccl = "whole-GPU nodes (nvidia.com/gpu)"
    for i, team in enumerate(cfg.teams):
        if not team.verify:
            continue
        key = config_key(f"teams[{i}]", "verify")
        if onprem is not None and isinstance(team.partition, OnPremPartition):
            if len(onprem.nodes) < 2:
                yield Issue(key, f"the ib_write_bw proof is two pods on two nodes; the cluster has {len(onprem.nodes)}")
            n = sum(whole.values())
            if n < 2:
                yield Issue(
                    key,
                    f"the NCCL proof is two pods with one GPU each on two nodes; {n} node(s) are {where_nccl} "
                    f"(groups {', '.join(sorted(whole)) or 'none'}): add one, or set verify: false",
                )
        if aks is not None and isinstance(team.partition, AksPartition):
            yield from _pool_pair(cfg, key, team.partition.node_pool, whole)
    if aks is not None and cfg.verification.aks_pools:
        for pool in aks.gpu_pools:
            yield from _pool_pair(cfg, config_key("verification", "aksPools"), pool.name, whole)


def _pool_pair(cfg: StackConfig, key: str, name: str, whole: dict[str, int]) -> Iterator[Issue]:
    aks = cfg.aks
    pool = aks.pools_by_name.get(name) if aks is not None else None
    if pool is None:
        return  # an unknown pool is reported by the tenancy rules
    if pool.max_count < 2:
        yield Issue(
            key,
            f"the proofs are pairs of pods on two nodes of pool {name!r}, whose maxCount is {pool.max_count}: "
            "raise it to at least 2, or set verify: false",
        )
    elif name not in whole:
        yield Issue(
            key,
            f"the NCCL proof's pods ask for a whole GPU (nvidia.com/gpu) and pool {name!r} advertises none "
            "(MIG under the mixed strategy, or time-slicing): set verify: false for it",
        )


def check(cfg: StackConfig) -> Iterator[Issue]:
    """The perftest pin, every isolation pair, and where the proof pairs can run."""
    yield from _pairs(cfg)
    v = cfg.versions
    if v.perftest is None and v.perftest_digest is None:
        yield Issue(
            config_key("versions", "perftestDigest"),
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
                config_key(where, role),
                f"{getattr(pair, role)!r} is not a target: a team with a partition, or pool-<pool> with "
                f"verification.aksPools (known: {known})",
            )
        if unknown:
            continue
        for role in ("client", "server"):
            if getattr(pair, role) in no_rdma:
                yield Issue(
                    config_key(where, role),
                    f"team {getattr(pair, role)!r} has quota.rdma: 0, so its probe pod (one RDMA device) "
                    "would not be admitted; give the team quota.rdma of at least 1",
                )
        if domains[pair.client] == domains[pair.server]:
            yield Issue(
                config_key(where, "server"),
                f"{pair.client!r} and {pair.server!r} are both in {domains[pair.client]}: "
                "a probe between them would connect; pick targets in two partitions",
            )
        key = (pair.client, pair.server)
        if key in seen:
            yield Issue(config_key(where), f"the same probe as verification.isolationPairs[{seen[key]}]")
        seen.setdefault(key, i)
