"""``gpuaas:teams``: the tenants, each with a namespace, a quota and optionally an InfiniBand partition."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    Discriminator,
    Field,
    Tag,
)

from components.model.base import Model
from components.model.queues import TeamQueue
from components.model.types import (
    AksPoolName,
    DnsLabel,
    LineText,
    MemoryMiB,
    NonNegativeInt,
    PKey,
    PositiveInt,
    Quantity,
)


class OnPremPartition(Model):
    """A team's InfiniBand partition on-prem: its P_Key and the VF index bound to it on every HCA."""

    pkey: PKey
    """The team's InfiniBand P_Key (``0x0001``..``0x7ffe``, written as a number or hex string such as ``0x0001``;
    ``0x8001`` names the same partition): unique per stack. OpenSM's partitions.conf puts the team's VFs in it."""
    vf_index: NonNegativeInt
    """Which VF of every HCA the team's partition gets (0 .. ``platform.fabric.vfsPerHca`` - 1), unique per stack;
    the team's pods get those VFs."""
    ipoib: bool = True
    """Give the partition an IPoIB broadcast group (``ipoib`` flag in partitions.conf, with
    ``platform.fabric.opensm.ipoibMtu``/``ipoibRate``); default true."""
    reconfigure: bool = False
    """Acknowledges that changing this ``pkey`` or ``vfIndex`` moves the team's VFs to another
    partition or pool under its running pods. Without it such a run stops (components/guards/fabric.py)."""


class AksPartition(Model):
    """On AKS a partition is a dedicated ND node pool: Azure assigns one P_Key per VMSS."""

    node_pool: AksPoolName
    """Name of the ND GPU pool (``platform.gpuPools[].name``) the team's pods are placed on: Azure puts each pool on
    its own InfiniBand partition."""


def _partition_kind(v: Any) -> str | None:
    if isinstance(v, dict):
        return "aks" if "nodePool" in v or "node_pool" in v else "onprem"
    if isinstance(v, AksPartition):
        return "aks"
    if isinstance(v, OnPremPartition):
        return "onprem"
    return None


Partition = Annotated[
    Annotated[OnPremPartition, Tag("onprem")] | Annotated[AksPartition, Tag("aks")],
    Discriminator(_partition_kind),
]


class HamiQuota(Model):
    """A team's HAMi slices (node groups with ``hami``): how many, with how much memory and SM share in all.

    Rendered as ``requests.nvidia.com/vgpu`` (the count, which the Kubernetes quota controller
    enforces) and ``limits.nvidia.com/vgpu-memory`` / ``limits.nvidia.com/vgpu-cores`` (what HAMi's own
    quota reads and enforces: memory and cores times the slices of each container); see
    components/model/hami.py.
    """

    gpus: NonNegativeInt = 0
    """Slices (``nvidia.com/vgpu``), at most ``splitCount`` per GPU."""
    memory: MemoryMiB = "0"
    """Device memory of all the team's slices together, whole MiB (e.g. ``160Gi``)."""
    cores: NonNegativeInt = 0
    """SM share of all the team's slices together, in percent of one GPU (``400``: four GPUs' worth)."""


class Quota(Model):
    """A team's quota. Extended resources are quota'd as ``requests.<resource>`` (Kubernetes docs)."""

    gpus: NonNegativeInt = 0
    """Whole GPUs (``requests.nvidia.com/gpu``) the team may request at once; default 0."""
    mig: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """MIG instances per profile name, e.g. ``{"1g.10gb": 4}`` (mixed strategy)."""
    time_sliced_gpus: NonNegativeInt = 0
    """Time-sliced GPU replicas (``requests.nvidia.com/gpu.shared``) the team may request at once; default 0."""
    rdma: NonNegativeInt = 0
    """On-prem: VFs of the team's partition; AKS: RDMA shared-device slots."""
    hami: HamiQuota = HamiQuota()
    """HAMi slices (node groups with ``hami``)."""
    cpu: Quantity = "64"
    """CPU the team's pods may request in all (``requests.cpu``, a Kubernetes quantity such as ``64`` or ``500m``);
    default ``64``."""
    memory: Quantity = "512Gi"
    """Memory the team's pods may request in all (``requests.memory``, a Kubernetes quantity such as ``512Gi``);
    default ``512Gi``."""
    pods: PositiveInt = 200
    """Most pods in the team's namespace (ResourceQuota ``pods``); default 200."""


class Team(Model):
    """A tenant: a namespace with a quota, RBAC for its groups, and optionally an IB partition."""

    name: DnsLabel
    """The team's name (a DNS label, unique per stack); also its namespace unless ``namespace`` is set, and the name
    of its partition and queue."""
    namespace: DnsLabel | None = None
    """Defaults to the team name."""
    groups: list[LineText] = Field(default_factory=list)
    """Identity-provider groups bound to the team's workload role."""
    privileged: bool = False
    """Pod Security ``privileged`` instead of ``baseline``: only for teams that truly need it."""
    protect: bool = True
    """Pulumi ``protect`` on the namespace: deleting it deletes every workload and volume claim
    of the team. To retire a team, set ``false``, run ``pulumi up``, then remove the team."""
    partition: Partition | None = None
    """The team's InfiniBand partition: on-prem ``{pkey, vfIndex}``, on AKS ``{nodePool}``; unset: the team gets no
    RDMA network of its own."""
    quota: Quota = Quota()
    """The team's ResourceQuota: GPUs of each kind, RDMA, CPU, memory and pods (defaults: :class:`Quota`'s)."""
    queue: TeamQueue = TeamQueue()
    """The team's Kueue queue (borrowing, lending, cohort, node groups); used only with ``gpuaas:queues.elastic:
    true``."""
    verify: bool = False
    """Run the ib_write_bw and NCCL proofs for this team after every ``pulumi up``."""

    @property
    def ns(self) -> str:
        return self.namespace if self.namespace is not None else self.name
