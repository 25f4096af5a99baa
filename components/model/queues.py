"""``gpuaas:queues`` and ``teams[].queue``: elastic team quotas with Kueue (:mod:`components.model.elastic`)."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from components.model.base import Model
from components.model.types import (
    DnsLabel,
    GoDurationSeconds,
    MemoryMiB,
    NonNegativeInt,
    PositiveInt32,
    PriorityClassName,
    Quantity,
    ServiceAccountRef,
    UserPriority,
)


class HamiAmounts(Model):
    """Amounts of HAMi slices in a borrowing or lending limit (the keys of ``quota.hami``)."""

    gpus: NonNegativeInt | None = None
    """HAMi slices (``nvidia.com/vgpu``); unset: no limit of its own."""
    memory: MemoryMiB | None = None
    """Whole MiB (e.g. ``80Gi``)."""
    cores: NonNegativeInt | None = None
    """SM share of the slices together, in percent of one GPU (``400``: four GPUs' worth); unset: no limit of its
    own."""


class QueueAmounts(Model):
    """Amounts per resource kind of a team's queue (a borrowing or a lending limit).

    A kind left out has no limit of its own: a GPU kind may then borrow whatever its cohort
    lends (at most the flavor's capacity) and lend all of its share; ``cpu``/``memory`` left out
    of ``borrowingLimit`` borrow nothing (their fleet capacity is not in the config).
    GPU kinds apply per node group (a Kueue ResourceFlavor); the partition resource (``rdma``)
    is never lent or borrowed.
    """

    gpus: NonNegativeInt | None = None
    """Whole GPUs (``nvidia.com/gpu``); unset: no limit of its own."""
    mig: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """MIG instances per profile name, e.g. ``{"1g.10gb": 4}``; a profile left out has no limit of its own."""
    time_sliced_gpus: NonNegativeInt | None = None
    """Time-sliced GPU replicas (``nvidia.com/gpu.shared``); unset: no limit of its own."""
    hami: HamiAmounts = HamiAmounts()
    """HAMi slices, their memory and SM share (the keys of ``quota.hami``)."""
    cpu: Quantity | None = None
    """CPU, a Kubernetes quantity (``16``, ``500m``); left out of ``borrowingLimit``: none is borrowed."""
    memory: Quantity | None = None
    """Memory, a Kubernetes quantity (``128Gi``); left out of ``borrowingLimit``: none is borrowed."""


class TeamQueue(Model):
    """A team's Kueue queue; only with ``gpuaas:queues.elastic: true`` (components/model/elastic.py)."""

    borrowing_limit: QueueAmounts = QueueAmounts()
    """Most the team may use beyond its quota, from what its cohort lends."""
    lending_limit: QueueAmounts = QueueAmounts()
    """Most of its quota the team lends while it does not use it (at most the quota)."""
    cohort: DnsLabel | None = None
    """Defaults to ``queues.cohort``: teams lend and borrow within one cohort only."""
    node_groups: list[DnsLabel] = Field(default_factory=list)
    """Node groups (AKS: GPU pools) the team's queue uses, in order of preference; its quota of
    each GPU kind lives in the first that offers it. Defaults to every group (AKS: its own
    partition's pool, or the pools outside every team's partition)."""


class KueuePreemption(Model):
    """ClusterQueue ``preemption`` of every team queue (Kueue ClusterQueue API, v1beta2)."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Any"
    """Reclaim lent quota from borrowers when its owner needs it back."""
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "LowerPriority"
    """Within a team, a higher-priority workload may preempt the team's lower-priority ones."""
    borrow_within_cohort: Literal["Never", "LowerPriority"] = "Never"
    """Whether a borrowing workload may preempt lower-priority workloads of other teams."""


class WorkloadPriorityClass(Model):
    """A Kueue WorkloadPriorityClass; workloads pick it with ``kueue.x-k8s.io/priority-class``."""

    name: PriorityClassName
    """Name of the WorkloadPriorityClass, which workloads put in the ``kueue.x-k8s.io/priority-class`` label: a DNS
    subdomain of at most 63 characters."""
    value: UserPriority
    """Priority of the workloads of this class (higher first); at most 1000000000, above which Kubernetes keeps
    values for system classes."""
    description: str = ""
    """Free text written to the class's ``description``; empty: none."""


KueueIntegration = Literal[
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/mpijob",
    "pod",
    "deployment",
    "statefulset",
]

#: Kueue v0.19.2 framework names (pkg/controller/jobs/*/…_controller.go ``FrameworkName``).
#: ``deployment`` and ``statefulset`` queue GPU Deployments and StatefulSets pod by pod; Kueue
#: enables ``pod`` with them (``ImplicitlyEnabledFrameworkNames``), see :func:`effective_integrations`.
DEFAULT_KUEUE_INTEGRATIONS: tuple[KueueIntegration, ...] = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/mpijob",
    "pod",
    "deployment",
    "statefulset",
)

#: Integrations whose workloads' pods Kueue manages through its ``pod`` integration, which it then
#: turns on by itself (deployment_controller.go / statefulset_controller.go: ``ImplicitlyEnabledFrameworkNames``).
IMPLIES_POD: Final = frozenset({"deployment", "statefulset"})

#: Integrations whose children Kubernetes' own controllers create (kube-controller-manager): no
#: operator of a stack's choosing is trusted for them (:class:`WorkloadController`).
BUILT_IN: Final = frozenset({"pod", "batch/job", "deployment", "statefulset"})


class WorkloadController(Model):
    """A workload operator that creates pods or Jobs in team namespaces (``queues.controllers``).

    Its pods and Jobs carry a controller ownerReference to their workload; only the identities
    listed here (and Kubernetes' own controllers) may create such objects in team namespaces,
    because Kueue skips a pod or Job whose controller is a workload it manages (v0.19.2
    ``FindAncestorJobManagedByKueue``; "same-namespace ownership spoofing is out of scope").
    """

    service_account: ServiceAccountRef
    """``<namespace>/<name>`` of the operator's ServiceAccount."""
    integrations: list[KueueIntegration] = Field(default_factory=list)
    """Kueue-managed kinds (``queues.integrations`` names) whose pods or Jobs this operator creates:
    those children pass the queue guard without a queue label of their own (their workload went
    through the queue). Empty: an operator Kueue does not know (Argo Workflows, Ray without its
    integration) whose GPU pods then name the queue themselves."""

    @property
    def username(self) -> str:
        namespace, _, name = self.service_account.partition("/")
        return f"system:serviceaccount:{namespace}:{name}"


#: The upstream install defaults: JobSet (config/default: namespace jobset-system, SA
#: jobset-controller-manager), the Kubeflow training operator v1 (manifests/overlays/standalone:
#: namespace kubeflow, SA training-operator) and the MPI operator v2 (deploy/v2beta1: namespace
#: mpi-operator, SA mpi-operator; it creates the workers' pods and the launcher Job).
DEFAULT_CONTROLLERS: Final[tuple[WorkloadController, ...]] = (
    WorkloadController(
        service_account="jobset-system/jobset-controller-manager", integrations=["jobset.x-k8s.io/jobset"]
    ),
    WorkloadController(service_account="kubeflow/training-operator", integrations=["kubeflow.org/pytorchjob"]),
    WorkloadController(service_account="mpi-operator/mpi-operator", integrations=["kubeflow.org/mpijob"]),
)


class Queues(Model):
    """Elastic team quotas with Kueue: idle GPUs lent within a cohort, reclaimed on demand.

    Off (the default): no Kueue, team quotas are hard ResourceQuotas as before.
    """

    elastic: bool = False
    """Turn on elastic team quotas: install Kueue and give every team a queue in a cohort, so idle GPU quota is lent
    and reclaimed on demand. Default false: no Kueue, team quotas are hard ResourceQuotas."""
    namespace: DnsLabel = "kueue-system"
    """Namespace of the Kueue release (default ``kueue-system``)."""
    cohort: DnsLabel = "gpuaas"
    """The cohort of every team that names none (``teams[].queue.cohort``)."""
    manage_jobs_without_queue_name: bool = False
    """``False``: Kueue ignores jobs without ``kueue.x-k8s.io/queue-name``, and gpuaas's admission
    policy refuses GPU workloads without it; ``True``: Kueue holds such jobs (suspended)."""
    integrations: list[KueueIntegration] = Field(default_factory=lambda: list(DEFAULT_KUEUE_INTEGRATIONS))
    """Job kinds Kueue manages; one whose CRD is absent waits until it appears (Kueue jobframework)."""
    controllers: list[WorkloadController] = Field(default_factory=lambda: list(DEFAULT_CONTROLLERS))
    """Operators trusted to create pods and Jobs for workloads in team namespaces (see
    :class:`WorkloadController`); Kubernetes' own controllers are always trusted."""
    preemption: KueuePreemption = KueuePreemption()
    """ClusterQueue ``preemption`` of every team queue (defaults: :class:`KueuePreemption`'s)."""
    priority_classes: list[WorkloadPriorityClass] = Field(default_factory=list)
    """Kueue WorkloadPriorityClasses to create; default none."""
    replicas: PositiveInt32 = 2
    """Kueue's manager replicas (chart ``controllerManager.replicas``): its pod webhook is
    ``failurePolicy: Fail`` on every team namespace, so with one replica down no team pod can
    be created. Two or more run with leader election, a PodDisruptionBudget and spread over nodes."""
    pods_ready_timeout_seconds: GoDurationSeconds = 600
    """Seconds an admitted workload has for all its pods to be ready before Kueue evicts it and
    requeues it (``waitForPodsReady.timeout``), giving back the quota it held (a pod refused by
    the ResourceQuota, unschedulable or stuck pulling its image never starts)."""
    helm_timeout_seconds: GoDurationSeconds = 600
    """Seconds ``pulumi up`` waits for the Kueue Helm release to become ready (default 600)."""


def effective_integrations(queues: Queues) -> frozenset[str]:
    """The frameworks Kueue runs: those listed, and ``pod`` where a listed one implies it."""
    listed = set(queues.integrations)
    if listed & IMPLIES_POD:
        listed.add("pod")
    return frozenset(listed)
