"""Where the proofs run: a target per verifying team (its partition) and per AKS pool, with its pass marks."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, Protocol

from components import k8s as kube
from components.model import dra, resources
from components.model.catalog import ND_SKUS
from components.model.config import StackConfig
from components.model.platform import GpuPool
from components.model.resources import rdma_shared_resource, sriov_resource
from components.model.teams import AksPartition, OnPremPartition, Team
from components.model.verification import Verification
from components.model.versions import Versions
from components.queueing.queues import local_queue_name
from components.tenancy.networks import proof_network


class ProofConfig(Protocol):
    """What the proofs' renderers read: the pass marks and burn-in settings, and the images.

    A :class:`~components.model.config.StackConfig` is one (the offline tools and tests pass theirs), and so
    is :class:`components.proofs.verification.VerificationArgs`, which carries these two sections alone.
    """

    @property
    def verification(self) -> Verification:
        """``gpuaas:verification``: the pass marks, the burn-in schedule and priority."""
        ...

    @property
    def versions(self) -> Versions:
        """The perftest and PyTorch images."""
        ...


#: Namespace of the per-pool proofs (AKS, ``verification.aksPools``): pools have no team namespace.
POOL_NAMESPACE: Final = resources.POOL_NAMESPACE
#: Multus' secondary-interface name for the team network (domain: NCCL_SOCKET_IFNAME on-prem).
SECONDARY_IFNAME: Final = "net1"


def pcidevice_env(resource: str) -> str:
    """The variable the SR-IOV device plugin sets to the allocated PCI addresses of ``resource``."""
    return "PCIDEVICE_" + resource.upper().replace(".", "_").replace("/", "_").replace("-", "_")


def socket_ifname(cfg: StackConfig) -> str:
    """NCCL's socket interface (bootstrap and the TCP run): the team network where it has addresses.

    With ``fabric.ipam: nv-ipam`` every pod gets an address on ``net1``. With ``static`` a pod's
    address comes from ``ips`` in its own network annotation (:func:`components.tenancy.networks.ipam`), and the
    two pods of an Indexed Job share one template, so ``net1`` has no IPv4 address there and NCCL's
    sockets use the pod network; the RDMA data path is the partition's VF either way.
    """
    onprem = cfg.onprem
    if onprem is not None and onprem.fabric.ipam == "nv-ipam":
        return SECONDARY_IFNAME
    return "eth0"


def gbits_to_gbytes(gbps: float) -> float:
    """Gb/s (line rates, perftest's ``--report_gbits``) to GB/s (nccl-tests' busbw)."""
    return gbps / 8


def perftest_image(cfg: ProofConfig) -> str:
    """``image@sha256:…`` where a digest pins it (with the tag kept for readers, ``image:tag@sha256:…``),
    else ``image:tag``. The rules refuse a config with neither."""
    v = cfg.versions
    ref = v.perftest_image + (f":{v.perftest}" if v.perftest else "")
    return ref + (f"@{v.perftest_digest}" if v.perftest_digest else "")


def pytorch_image(cfg: ProofConfig) -> str:
    return f"{cfg.versions.pytorch_image}:{cfg.versions.pytorch}"


@dataclass(frozen=True)
class Target:
    """Where one set of proofs runs and what it must reach. Built by :func:`targets`."""

    #: Segment of the Pulumi child names: the team name, or ``pool-<pool>``.
    key: str
    namespace: str
    #: Prefix of every object's metadata.name in ``namespace``.
    prefix: str
    link_rate_gbps: int
    #: The extended resource that hands the pod its RDMA device.
    rdma_resource: str
    #: NetworkAttachmentDefinition to attach as ``net1`` (on-prem), else None.
    network: str | None
    socket_ifname: str
    #: On AKS: the pool's node selector label value and its tolerations.
    pool: str | None = None
    tolerations: tuple[dict[str, str], ...] = field(default_factory=tuple)
    #: The team's Kueue LocalQueue with elastic quotas (its GPU Jobs must name it), else None.
    queue: str | None = None
    #: GPUs through ResourceClaims (the DRA model: the team's ``gpuaas-gpu`` template), not the device plugin.
    gpu_claims: bool = False

    @property
    def vf_env(self) -> str | None:
        return pcidevice_env(self.rdma_resource) if self.network is not None else None


def _pool_target(cfg: StackConfig, key: str, namespace: str, prefix: str, pool: GpuPool) -> Target:
    sku = ND_SKUS.get(pool.vm_size)
    return Target(
        key=key,
        namespace=namespace,
        prefix=prefix,
        link_rate_gbps=sku.ib_gbps_per_gpu if sku else 0,
        rdma_resource=rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name),
        network=None,
        socket_ifname="eth0",
        pool=pool.name,
        tolerations=tuple(kube.taint_toleration(t) for t in pool.taints),
        gpu_claims=dra.uses_dra(cfg),
    )


def team_target(cfg: StackConfig, team: Team) -> Target | None:
    """Where a team's proofs (and the probes into its partition) run; ``None`` without a usable partition."""
    target = _team_target(cfg, team)
    if target is not None and cfg.queues.elastic:
        return replace(target, queue=local_queue_name(team))
    return target


def _team_target(cfg: StackConfig, team: Team) -> Target | None:
    onprem, aks = cfg.onprem, cfg.aks
    if onprem is not None and isinstance(team.partition, OnPremPartition):
        return Target(
            key=team.name,
            namespace=team.ns,
            prefix="verify",
            link_rate_gbps=onprem.fabric.link_rate_gbps,
            rdma_resource=sriov_resource(team.partition.pkey),
            network=proof_network(cfg, team),
            socket_ifname=socket_ifname(cfg),
            gpu_claims=dra.uses_dra(cfg),
        )
    if aks is not None and isinstance(team.partition, AksPartition):
        pool = aks.pools_by_name.get(team.partition.node_pool)
        if pool is not None:  # an unknown pool is a config error reported by the rules
            return _pool_target(cfg, team.name, team.ns, "verify", pool)
    return None


def _pool_targets(cfg: StackConfig) -> list[Target]:
    aks = cfg.aks
    if aks is None or not cfg.verification.aks_pools:
        return []
    return [_pool_target(cfg, f"pool-{p.name}", POOL_NAMESPACE, f"verify-{p.name}", p) for p in aks.gpu_pools]


def targets(cfg: StackConfig) -> list[Target]:
    """Every place proofs run, in config order: verify teams first, then AKS pools."""
    out = [t for team in cfg.teams if team.verify and (t := team_target(cfg, team)) is not None]
    return out + _pool_targets(cfg)


def every_target(cfg: StackConfig) -> dict[str, Target]:
    """Every team with a partition (verified or not: a probe's server may be in any) and the pool targets."""
    out = {t.key: t for team in cfg.teams if (t := team_target(cfg, team)) is not None}
    out |= {t.key: t for t in _pool_targets(cfg)}
    return out


def ib_min_gbps(cfg: ProofConfig, t: Target) -> float:
    """ib_write_bw pass mark in Gb/s."""
    return round(cfg.verification.ib_write_bw_min_fraction * t.link_rate_gbps, 3)


def nccl_min_busbw_gbytes(cfg: ProofConfig, t: Target) -> float:
    """NCCL GPUDirect busbw pass mark in GB/s (one GPU and one NIC port per pod)."""
    return round(cfg.verification.nccl_gdr_min_fraction * gbits_to_gbytes(t.link_rate_gbps), 3)
