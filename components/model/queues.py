"""``gpuaas:queues`` and ``teams[].queue``: elastic team quotas with Kueue (:mod:`components.model.elastic`)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from components.model.base import Model
from components.model.types import (
    DnsLabel,
    DnsSubdomain,
    MemoryMiB,
    NonNegativeInt,
    PositiveInt,
)


class HamiAmounts(Model):
    """Amounts of HAMi slices in a borrowing or lending limit (the keys of ``quota.hami``)."""

    gpus: NonNegativeInt | None = None
    #: Whole MiB (e.g. ``80Gi``).
    memory: MemoryMiB | None = None
    cores: NonNegativeInt | None = None


class QueueAmounts(Model):
    """Amounts per resource kind of a team's queue (a borrowing or a lending limit).

    A kind left out has no limit of its own: a GPU kind may then borrow whatever its cohort
    lends (at most the flavor's capacity) and lend all of its share; ``cpu``/``memory`` left out
    of ``borrowingLimit`` borrow nothing (their fleet capacity is not in the config).
    GPU kinds apply per node group (a Kueue ResourceFlavor); the partition resource (``rdma``)
    is never lent or borrowed.
    """

    gpus: NonNegativeInt | None = None
    mig: dict[str, NonNegativeInt] = Field(default_factory=dict)
    time_sliced_gpus: NonNegativeInt | None = None
    hami: HamiAmounts = HamiAmounts()
    cpu: str | None = None
    memory: str | None = None


class TeamQueue(Model):
    """A team's Kueue queue; only with ``gpuaas:queues.elastic: true`` (components/model/elastic.py)."""

    #: Most the team may use beyond its quota, from what its cohort lends.
    borrowing_limit: QueueAmounts = QueueAmounts()
    #: Most of its quota the team lends while it does not use it (at most the quota).
    lending_limit: QueueAmounts = QueueAmounts()
    #: Defaults to ``queues.cohort``: teams lend and borrow within one cohort only.
    cohort: DnsLabel | None = None
    #: Node groups (AKS: GPU pools) the team's queue uses, in order of preference; its quota of
    #: each GPU kind lives in the first that offers it. Defaults to every group (AKS: its own
    #: partition's pool, or the pools outside every team's partition).
    node_groups: list[DnsLabel] = Field(default_factory=list)


class KueuePreemption(Model):
    """ClusterQueue ``preemption`` of every team queue (Kueue ClusterQueue API, v1beta2)."""

    #: Reclaim lent quota from borrowers when its owner needs it back.
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Any"
    #: Within a team, a higher-priority workload may preempt the team's lower-priority ones.
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "LowerPriority"
    #: Whether a borrowing workload may preempt lower-priority workloads of other teams.
    borrow_within_cohort: Literal["Never", "LowerPriority"] = "Never"


class WorkloadPriorityClass(Model):
    """A Kueue WorkloadPriorityClass; workloads pick it with ``kueue.x-k8s.io/priority-class``."""

    name: DnsSubdomain
    value: int
    description: str = ""


KueueIntegration = Literal[
    "batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "kubeflow.org/mpijob", "pod"
]

DEFAULT_KUEUE_INTEGRATIONS: tuple[KueueIntegration, ...] = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/mpijob",
    "pod",
)


class Queues(Model):
    """Elastic team quotas with Kueue: idle GPUs lent within a cohort, reclaimed on demand.

    Off (the default): no Kueue, team quotas are hard ResourceQuotas as before.
    """

    elastic: bool = False
    namespace: DnsLabel = "kueue-system"
    #: The cohort of every team that names none (``teams[].queue.cohort``).
    cohort: DnsLabel = "gpuaas"
    #: ``False``: Kueue ignores jobs without ``kueue.x-k8s.io/queue-name``, and gpuaas's admission
    #: policy refuses GPU workloads without it; ``True``: Kueue holds such jobs (suspended).
    manage_jobs_without_queue_name: bool = False
    #: Job kinds Kueue manages; one whose CRD is absent waits until it appears (Kueue jobframework).
    integrations: list[KueueIntegration] = Field(default_factory=lambda: list(DEFAULT_KUEUE_INTEGRATIONS))
    preemption: KueuePreemption = KueuePreemption()
    priority_classes: list[WorkloadPriorityClass] = Field(default_factory=list)
    helm_timeout_seconds: PositiveInt = 600
