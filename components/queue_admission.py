"""Admission for elastic queues: GPU workloads of a team go through the team's own Kueue queue.

Kueue admits what its ClusterQueues allow, but only for workloads it manages: a Job without
``kueue.x-k8s.io/queue-name`` is ignored unless ``manageJobsWithoutQueueName`` is on (Kueue
"Run a Job" / config API), and the ResourceQuota now lets a team hold its borrowing ceiling
(:mod:`components.elastic`). So, in every team namespace (label ``gpuaas.io/team``):

1. ``own-queue``: a workload that names a queue names its team's LocalQueue, whose name is the
   team name (= the namespace's ``gpuaas.io/team`` label, read from ``namespaceObject``). Naming
   another team's queue is refused, on create and on update (a relabel).
2. ``through-queue`` (only while ``queues.manageJobsWithoutQueueName`` is false): a workload that
   requests a GPU kind (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``) names
   a queue. Pods with a controller owner are their owner's business (the Job, JobSet, … was
   checked; Kueue's pod integration skips them the same way). A plain GPU pod with
   ``pod`` not among ``queues.integrations`` cannot be queued at all and is refused.

One policy per workload kind (ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1), so
each expression is type-checked against one schema; a kind whose CRD is absent matches nothing.
"""

from __future__ import annotations

from typing import Final

from components.config import StackConfig
from components.k8s import Manifest
from components.teams import PART_OF, TEAM_LABEL

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
POLICY_PREFIX: Final = "gpuaas-team-queue"

_GPU: Final = "r == 'nvidia.com/gpu' || r == 'nvidia.com/gpu.shared' || r.startsWith('nvidia.com/mig-')"
_WANTS: Final = (
    f"has(c.resources) && ((has(c.resources.requests) && c.resources.requests.exists(r, {_GPU})) || "
    f"(has(c.resources.limits) && c.resources.limits.exists(r, {_GPU})))"
)
WANTS_GPU: Final = (
    f"variables.podSpecs.exists(s, s.containers.exists(c, {_WANTS}) || "
    f"(has(s.initContainers) && s.initContainers.exists(c, {_WANTS})))"
)
QUEUE_VAR: Final = (
    f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels"
    f" ? object.metadata.labels['{QUEUE_LABEL}'] : ''"
)
OWN_QUEUE_VAR: Final = f"namespaceObject.metadata.labels['{TEAM_LABEL}']"


def _replica_specs(field: str) -> str:
    return f"has(object.spec.{field}) ? object.spec.{field}.map(k, object.spec.{field}[k].template.spec) : []"


#: (integration, apiGroup, version, plural, the pod specs of one object as a CEL list)
KINDS: Final[tuple[tuple[str, str, str, str, str], ...]] = (
    ("pod", "", "v1", "pods", "[object.spec]"),
    ("batch/job", "batch", "v1", "jobs", "[object.spec.template.spec]"),
    (
        "jobset.x-k8s.io/jobset",
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobsets",
        "has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.map(r, r.template.spec.template.spec) : []",
    ),
    ("kubeflow.org/pytorchjob", "kubeflow.org", "v1", "pytorchjobs", _replica_specs("pytorchReplicaSpecs")),
    ("kubeflow.org/mpijob", "kubeflow.org", "v2beta1", "mpijobs", _replica_specs("mpiReplicaSpecs")),
)

OWNED: Final = (
    "has(object.metadata.ownerReferences) && "
    "object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller)"
)


def _team_namespaces() -> dict[str, object]:
    return {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}


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
        }
    ]
    if not cfg.queues.manage_jobs_without_queue_name or not managed:
        exempt = f"({OWNED}) || " if plural == "pods" else ""
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
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(plural), "labels": dict(PART_OF)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": _team_namespaces(),
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": [version],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [plural],
                    }
                ],
            },
            "variables": [
                {"name": "queue", "expression": QUEUE_VAR},
                {"name": "ownQueue", "expression": OWN_QUEUE_VAR},
                {"name": "podSpecs", "expression": specs},
                {"name": "wantsGpu", "expression": WANTS_GPU},
            ],
            "validations": validations,
        },
    }


def queue_binding(plural: str) -> Manifest:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy_name(plural), "labels": dict(PART_OF)},
        "spec": {
            "policyName": policy_name(plural),
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": _team_namespaces()},
        },
    }


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
    return out
