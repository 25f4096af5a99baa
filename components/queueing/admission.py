"""Admission for elastic queues: GPU workloads of a team go through the team's own Kueue queue.

Kueue admits what its ClusterQueues allow, but only for workloads it manages: a Job without
``kueue.x-k8s.io/queue-name`` is ignored unless ``manageJobsWithoutQueueName`` is on (Kueue
"Run a Job" / config API), and the ResourceQuota now lets a team hold its borrowing ceiling
(:mod:`components.model.elastic`). So, in every team namespace (label ``gpuaas.io/team``):

1. ``own-queue``: a workload that names a queue names its team's LocalQueue, whose name is the
   team name (= the namespace's ``gpuaas.io/team`` label, read from ``namespaceObject``). Naming
   another team's queue is refused, on create and on update (a relabel).
2. ``through-queue`` (only while ``queues.manageJobsWithoutQueueName`` is false): a workload that
   asks for what the queue counts and no one else may hand out — a GPU kind (``nvidia.com/gpu``,
   ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``, HAMi's ``nvidia.com/vgpu*``), the team's partition resource
   (``nvidia.com/sriov*``, ``rdma/*``) or DRA ``resourceClaims`` (Kueue counts a claim through
   ``deviceClassMappings``) — names a queue, on CREATE and on an UPDATE that turns a pod template
   into such a one. Then the VF budget of the ResourceQuota and of the ClusterQueue is one budget:
   nothing outside the queue takes VFs Kueue thinks free. Children of a queued workload are exempt
   by who creates them *and* what they belong to
   (:func:`components.queueing.controllers.exempt_children`): the Job controller's pods of a Job,
   the training operator's pods of a PyTorchJob. A pod with ``pod`` not among the integrations
   cannot be queued at all and is refused.
3. ``same-queue``: an UPDATE keeps the queue label as it was (value or absence): removing it from
   a suspended Job would let it run outside Kueue, adding it later would move a running one in.
4. ReplicaSets (which the team role may write) are no Kueue integration: a GPU template there is
   refused, except the ReplicaSets the deployment controller makes for a Deployment (that
   Deployment was checked; a rollout of a GPU Deployment made before elastic quotas is not
   trapped). Deployments and StatefulSets are queued through Kueue's ``deployment`` and
   ``statefulset`` integrations (on by default); without them they are refused like ReplicaSets.

Two more guards complete it: nobody but a controller sets a controller ownerReference
(:mod:`components.queueing.controllers`, Kueue skips the children of workloads it manages), and
nobody but Kueue unsuspends a queued workload (:mod:`components.queueing.suspend`).

One policy per workload kind (ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1), so
each expression is type-checked against one schema; a kind whose CRD is absent matches nothing.
"""

from __future__ import annotations

import re
from typing import Final

from components.k8s import Manifest
from components.model.queues import Queues, effective_integrations
from components.queueing import controllers, suspend
from components.queueing.controllers import CONTROLLER_REFS
from components.tenancy import policy
from components.tenancy.labels import TEAM_LABEL

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
POLICY_PREFIX: Final = "gpuaas-team-queue"

#: What the queue counts and nothing else may hand out: every ``nvidia.com/*`` resource (GPU kinds,
#: HAMi's ``nvidia.com/vgpu*`` slices, the SR-IOV partition pools) and the RDMA shared device
#: (``rdma/*``). Not cpu or memory.
_GPU: Final = "r.startsWith('nvidia.com/') || r.startsWith('rdma/')"
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
    ("deployment", "apps", "v1", "deployments", "[o.spec.template.spec]"),
    ("statefulset", "apps", "v1", "statefulsets", "[o.spec.template.spec]"),
)
#: Kinds covered whatever the integrations say: the team role may write them.
ALWAYS: Final = frozenset({"pods", "jobs", "deployments", "statefulsets"})
#: apps/v1 kinds the team role may write that Kueue has no integration for.
APPS_KINDS: Final[tuple[str, ...]] = ("replicasets",)


def policy_name(plural: str) -> str:
    return f"{POLICY_PREFIX}-{plural}"


def _through_queue(exempt: str, queued: str) -> str:
    """CEL: a workload asking for queued resources names its queue (``queued``: ``'false'`` when
    the kind cannot be queued). CREATE: unless ``exempt``; UPDATE: once its template turns into one."""
    create = f"({exempt}) || " if exempt else ""
    return (
        f"request.operation == 'CREATE' ? ({create}!variables.wantsGpu || {queued}) : "
        f"(!variables.wantsGpu || variables.oldWantsGpu || {queued})"
    )


def queue_policy(
    queues: Queues, integration: str | None, group: str, version: str, plural: str, specs: str
) -> Manifest:
    """The policy for one workload kind (see the module docstring for its checks); ``integration``
    ``None``: a kind Kueue has no integration for (ReplicaSets)."""
    managed = integration is not None and integration in effective_integrations(queues)
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
    if not queues.manage_jobs_without_queue_name or not managed:
        exempt = controllers.exempt_children(queues, plural)
        if managed:
            expression = _through_queue(exempt, "variables.queue == variables.ownQueue")
            message = (
                "'GPU and RDMA workloads in team namespaces go through the team\\'s Kueue queue: add the label "
                f"{QUEUE_LABEL}: ' + variables.ownQueue"
            )
        else:
            expression = _through_queue(exempt, "false")
            why = (
                f"gpuaas:queues.integrations lacks {integration}"
                if integration
                else "Kueue has no integration for them"
            )
            message = (
                f"'{plural} are not managed by Kueue here ({why}), so GPU and RDMA ones cannot go through the "
                f"team\\'s queue: run them as a Job labelled {QUEUE_LABEL}: ' + variables.ownQueue"
            )
        validations.append({"expression": expression, "messageExpression": message, "reason": "Forbidden"})
    return _policy(plural, group, version, specs, validations)


def _root(specs: str, root: str) -> str:
    """The pod-spec list of :data:`KINDS` read from ``object`` or ``oldObject``."""
    return re.sub(r"\bo\.", f"{root}.", specs)


def _policy(plural: str, group: str, version: str, specs: str, validations: list[dict[str, str]]) -> Manifest:
    variables = [
        {"name": "queue", "expression": QUEUE_VAR},
        {"name": "ownQueue", "expression": OWN_QUEUE_VAR},
        {"name": "podSpecs", "expression": _root(specs, "object")},
        {"name": "wantsGpu", "expression": WANTS_GPU},
        {"name": "oldPodSpecs", "expression": f"request.operation == 'UPDATE' ? ({_root(specs, 'oldObject')}) : []"},
        {"name": "oldWantsGpu", "expression": OLD_WANTS_GPU},
        {"name": "controllerRefs", "expression": CONTROLLER_REFS},
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


def covered(queues: Queues) -> list[tuple[str | None, str, str, str, str]]:
    """(integration, group, version, plural, specs) of every kind a queue policy covers, in order."""
    enabled = effective_integrations(queues)
    out: list[tuple[str | None, str, str, str, str]] = [k for k in KINDS if k[3] in ALWAYS or k[0] in enabled]
    out += [(None, "apps", "v1", plural, "[o.spec.template.spec]") for plural in APPS_KINDS]
    return out


def queue_admission_objects(queues: Queues) -> dict[str, Manifest]:
    """:func:`guard_objects` where ``queues.elastic``, else empty."""
    return guard_objects(queues) if queues.elastic else {}


def guard_objects(queues: Queues) -> dict[str, Manifest]:
    """Role → object: a policy and a binding per workload kind (pods, Jobs and the apps kinds always;
    the others where ``queues.integrations`` names them), the ownerReference guard and the
    unsuspend guard per suspendable kind."""
    out: dict[str, Manifest] = {}
    kinds = covered(queues)
    for integration, group, version, plural, specs in kinds:
        out[f"{plural}-queue-policy"] = queue_policy(queues, integration, group, version, plural, specs)
        out[f"{plural}-queue-binding"] = queue_binding(plural)
    out["owners-queue-policy"] = controllers.owners_policy(queues, [(g, v, p) for _i, g, v, p, _s in kinds])
    out["owners-queue-binding"] = controllers.owners_binding()
    enabled = effective_integrations(queues)
    for integration in suspend.SUSPENDABLE:
        if integration in enabled:
            plural = suspend.SUSPENDABLE[integration][2]
            out[f"{plural}-suspend-policy"] = suspend.suspend_policy(queues, integration)
            out[f"{plural}-suspend-binding"] = suspend.suspend_binding(integration)
    return out
