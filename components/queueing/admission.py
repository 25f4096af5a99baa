"""Admission for elastic queues: GPU workloads of a team go through the team's own Kueue queue.

Kueue admits what its ClusterQueues allow, but only for workloads it manages: a Job without
``kueue.x-k8s.io/queue-name`` is ignored unless ``manageJobsWithoutQueueName`` is on (Kueue
"Run a Job" / config API), and the ResourceQuota now lets a team hold its borrowing ceiling
(:mod:`components.model.elastic`). So, in every team namespace (label ``gpuaas.io/team``):

1. ``own-queue``: a workload that names a queue names its team's LocalQueue, whose name is the
   team name (= the namespace's ``gpuaas.io/team`` label, read from ``namespaceObject``). Naming
   another team's queue is refused, on create and on update (a relabel).
2. ``through-queue`` (only while ``queues.manageJobsWithoutQueueName`` is false): a workload that
   requests a GPU kind (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``, HAMi's
   ``nvidia.com/vgpu*``) names a queue. A GPU workload is one whose pod spec requests a GPU extended resource or has
   ``resourceClaims`` (DRA: a claim is how a GPU is asked for, and Kueue counts it through
   ``deviceClassMappings``). Children created by a workload controller are exempt, decided by
   *who asks* (``request.userInfo.username``, which a user cannot forge), never by
   ``ownerReferences`` (which anyone may write): their parent was checked. A plain GPU pod with
   ``pod`` not among ``queues.integrations`` cannot be queued at all and is refused.
3. ``same-queue``: an UPDATE keeps the queue label as it was (value or absence): removing it from
   a suspended Job would let it run outside Kueue, adding it later would move a running one in.
4. apps/v1 Deployments, StatefulSets and ReplicaSets (which the team role may write): Kueue
   manages none of them here (its ``deployment``/``statefulset`` integrations are not among
   ``queues.integrations``, and there is none for ReplicaSets), so a GPU pod template there is
   refused outright, on create and whenever an update turns a template into a GPU one.

One policy per workload kind (ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1), so
each expression is type-checked against one schema; a kind whose CRD is absent matches nothing.
"""

from __future__ import annotations

import re
from typing import Final

from components.k8s import Manifest
from components.model.config import StackConfig
from components.tenancy import policy
from components.tenancy.labels import TEAM_LABEL

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
POLICY_PREFIX: Final = "gpuaas-team-queue"

_GPU: Final = (
    "r == 'nvidia.com/gpu' || r == 'nvidia.com/gpu.shared' || r.startsWith('nvidia.com/mig-') || "
    "r.startsWith('nvidia.com/vgpu')"
)
_WANTS: Final = (
    f"has(c.resources) && ((has(c.resources.requests) && c.resources.requests.exists(r, {_GPU})) || "
    f"(has(c.resources.limits) && c.resources.limits.exists(r, {_GPU})))"
)
_SPEC_WANTS: Final = (
    f"s.containers.exists(c, {_WANTS}) || (has(s.initContainers) && s.initContainers.exists(c, {_WANTS})) || "
    "(has(s.resourceClaims) && size(s.resourceClaims) > 0)"
)
WANTS_GPU: Final = f"variables.podSpecs.exists(s, {_SPEC_WANTS})"
OLD_WANTS_GPU: Final = f"variables.oldPodSpecs.exists(s, {_SPEC_WANTS})"
QUEUE_VAR: Final = (
    f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels"
    f" ? object.metadata.labels['{QUEUE_LABEL}'] : ''"
)
#: UPDATE only (``oldObject`` is null on CREATE): the queue label must stay as it was, present or not.
SAME_QUEUE: Final = (
    "request.operation != 'UPDATE' || ("
    f"(has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels) == "
    f"(has(oldObject.metadata.labels) && '{QUEUE_LABEL}' in oldObject.metadata.labels) && "
    f"(!has(object.metadata.labels) || !('{QUEUE_LABEL}' in object.metadata.labels) || "
    f"object.metadata.labels['{QUEUE_LABEL}'] == oldObject.metadata.labels['{QUEUE_LABEL}']))"
)
OWN_QUEUE_VAR: Final = f"namespaceObject.metadata.labels['{TEAM_LABEL}']"


def _replica_specs(field: str) -> str:
    return f"has(o.spec.{field}) ? o.spec.{field}.map(k, o.spec.{field}[k].template.spec) : []"


#: (integration, apiGroup, version, plural, the pod specs of one object ``o`` as a CEL list)
KINDS: Final[tuple[tuple[str, str, str, str, str], ...]] = (
    ("pod", "", "v1", "pods", "[o.spec]"),
    ("batch/job", "batch", "v1", "jobs", "[o.spec.template.spec]"),
    (
        "jobset.x-k8s.io/jobset",
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobsets",
        "has(o.spec.replicatedJobs) ? o.spec.replicatedJobs.map(r, r.template.spec.template.spec) : []",
    ),
    ("kubeflow.org/pytorchjob", "kubeflow.org", "v1", "pytorchjobs", _replica_specs("pytorchReplicaSpecs")),
    ("kubeflow.org/mpijob", "kubeflow.org", "v2beta1", "mpijobs", _replica_specs("mpiReplicaSpecs")),
)

#: apps/v1 kinds the team role may write (components/tenancy/teams.py); Kueue manages none of them here.
APPS_KINDS: Final[tuple[str, ...]] = ("deployments", "statefulsets", "replicasets")

#: Who creates a workload's children. kube-controller-manager signs in as
#: ``system:kube-controller-manager`` unless ``--use-service-account-credentials`` (then each
#: controller as its own kube-system service account; kubernetes cmd/kube-controller-manager,
#: "controller roles" bootstrap policy). Team users are never these.
KCM: Final = "system:kube-controller-manager"
POD_CONTROLLERS: Final[tuple[str, ...]] = (
    KCM,
    "system:serviceaccount:kube-system:job-controller",
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:statefulset-controller",
    # kubeflow training-operator (manifests/base: namespace kubeflow, SA training-operator) and
    # mpi-operator v2 (deploy/v2beta1: namespace mpi-operator, SA mpi-operator) create pods.
    "system:serviceaccount:kubeflow:training-operator",
    "system:serviceaccount:mpi-operator:mpi-operator",
)
#: The JobSet controller (config/default: namespace jobset-system, SA jobset-controller-manager)
#: copies labels from ``replicatedJobs[].template`` only, so a JobSet labelled on itself has
#: unlabelled child Jobs; the JobSet was checked (and Kueue skips Jobs whose parent JobSet it
#: manages). mpi-operator's launcher is a Job of its MPIJob. Never ``system:kube-controller-manager``
#: here: the CronJob controller signs in as that, and a CronJob's Jobs must carry the label.
JOB_CONTROLLERS: Final[tuple[str, ...]] = (
    "system:serviceaccount:jobset-system:jobset-controller-manager",
    "system:serviceaccount:mpi-operator:mpi-operator",
)


def _controller_exempt(plural: str) -> str:
    names = {"pods": POD_CONTROLLERS, "jobs": JOB_CONTROLLERS}.get(plural, ())
    if not names:
        return ""
    return "request.userInfo.username in [" + ", ".join(f"'{n}'" for n in names) + "] || "


def policy_name(plural: str) -> str:
    return f"{POLICY_PREFIX}-{plural}"


def queue_policy(cfg: StackConfig, integration: str, group: str, version: str, plural: str, specs: str) -> Manifest:
    """The policy for one workload kind (see the module docstring for its checks)."""
    managed = integration in cfg.queues.integrations
    validations = [
        {
            "expression": "variables.queue == '' || variables.queue == variables.ownQueue",
            "messageExpression": (
                f"'{QUEUE_LABEL} ' + variables.queue + ' is not this team\\'s queue: workloads in namespace ' + "
                f"request.namespace + ' may name only LocalQueue ' + variables.ownQueue"
            ),
            "reason": "Forbidden",
        },
        {
            "expression": SAME_QUEUE,
            "message": f"{QUEUE_LABEL} cannot be added, changed or removed after creation: recreate the workload",
            "reason": "Forbidden",
        },
    ]
    if not cfg.queues.manage_jobs_without_queue_name or not managed:
        exempt = _controller_exempt(plural)
        if managed:
            expression = (
                f"request.operation != 'CREATE' || {exempt}!variables.wantsGpu || variables.queue == variables.ownQueue"
            )
            message = (
                "'GPU workloads in team namespaces go through the team\\'s Kueue queue: add the label "
                f"{QUEUE_LABEL}: ' + variables.ownQueue"
            )
        else:
            expression = f"request.operation != 'CREATE' || {exempt}!variables.wantsGpu"
            message = (
                f"'{plural} are not managed by Kueue here (gpuaas:queues.integrations lacks {integration}), so GPU "
                "ones cannot go through the team\\'s queue: run them as a Job labelled "
                f"{QUEUE_LABEL}: ' + variables.ownQueue"
            )
        validations.append({"expression": expression, "messageExpression": message, "reason": "Forbidden"})
    return _policy(plural, group, version, specs, validations)


def apps_policy(plural: str) -> Manifest:
    """apps/v1 Deployments, StatefulSets, ReplicaSets: no GPU pod template (module docstring, 4).

    An UPDATE of a template that already asked for a GPU (made before elastic quotas) passes: the
    deployment controller updates its ReplicaSets to scale them, and refusing it would wedge them.
    """
    validations = [
        {
            "expression": "!variables.wantsGpu || (request.operation == 'UPDATE' && variables.oldWantsGpu)",
            "messageExpression": (
                f"'{plural} are not managed by Kueue here, so GPU ones would bypass the team\\'s queue: run "
                f"GPU work as a Job labelled {QUEUE_LABEL}: ' + variables.ownQueue"
            ),
            "reason": "Forbidden",
        }
    ]
    return _policy(plural, "apps", "v1", "[o.spec.template.spec]", validations)


def _root(specs: str, root: str) -> str:
    """The pod-spec list of :data:`KINDS` read from ``object`` or ``oldObject``."""
    return re.sub(r"\bo\.", f"{root}.", specs)


def _policy(plural: str, group: str, version: str, specs: str, validations: list[dict[str, str]]) -> Manifest:
    old_specs = f"request.operation == 'UPDATE' ? {_root(specs, 'oldObject')} : []" if group == "apps" else None
    variables = [
        {"name": "queue", "expression": QUEUE_VAR},
        {"name": "ownQueue", "expression": OWN_QUEUE_VAR},
        {"name": "podSpecs", "expression": _root(specs, "object")},
        {"name": "wantsGpu", "expression": WANTS_GPU},
    ]
    if old_specs is not None:
        variables += [
            {"name": "oldPodSpecs", "expression": old_specs},
            {"name": "oldWantsGpu", "expression": OLD_WANTS_GPU},
        ]
    return policy.policy(
        policy_name(plural),
        namespaces=policy.team_namespaces(),
        rules=[policy.resource_rule(group, version, ["CREATE", "UPDATE"], [plural])],
        variables=variables,
        validations=validations,
    )


def queue_binding(plural: str) -> Manifest:
    return policy.binding(policy_name(plural), policy.team_namespaces())


def queue_admission_objects(cfg: StackConfig) -> dict[str, Manifest]:
    """Role → object: a policy and a binding per workload kind (pods and Jobs always; the others
    where ``queues.integrations`` names them). Empty unless ``queues.elastic``."""
    if not cfg.queues.elastic:
        return {}
    out: dict[str, Manifest] = {}
    for integration, group, version, plural, specs in KINDS:
        if plural in ("pods", "jobs") or integration in cfg.queues.integrations:
            out[f"{plural}-queue-policy"] = queue_policy(cfg, integration, group, version, plural, specs)
            out[f"{plural}-queue-binding"] = queue_binding(plural)
    for plural in APPS_KINDS:
        out[f"{plural}-queue-policy"] = apps_policy(plural)
        out[f"{plural}-queue-binding"] = queue_binding(plural)
    return out
