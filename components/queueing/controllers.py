"""Who creates the pods and Jobs of team workloads, and the guard that no one else claims to.

Kueue decides whether to hold a pod or Job by its *controller ownerReference*: its pod webhook
skips any pod whose controller chain reaches a workload it manages (v0.19.2
``pkg/controller/jobs/pod/pod_webhook.go`` → ``jobframework.FindAncestorJobManagedByKueue``), and
its reconciler only checks that the referenced object exists with that UID ("same-namespace
ownership spoofing is out of scope", ``pkg/controller/jobframework/reconciler.go``). So a team
member who creates a suspended Job with the team's queue label and then a bare GPU pod with a
``controller: true`` ownerReference to it gets a pod Kueue neither gates nor counts: GPUs the team
holds outside its queue, which Kueue cannot reclaim.

Anyone may write an ownerReference; only the controller that owns a kind writes one in the
normal course. :func:`owners_policy` (``gpuaas-team-queue-owners``) therefore refuses, in every
team namespace, an object that gains a controller ownerReference (on CREATE, or added on UPDATE)
unless the request comes from a controller identity (:func:`trusted`): Kubernetes' own
(:data:`KUBERNETES`) and the operators a stack lists in ``gpuaas:queues.controllers``. The one
exception is ``kubectl create job --from=cronjob/<name>``, which writes a controller reference to
the CronJob: a CronJob is not a Kueue integration, so its Job is queued as itself.

The same identities exempt a workload's children from the through-queue guard
(:mod:`components.queueing.admission`), but *by kind and identity together*
(:func:`exempt_children`): the Job controller's pods of a Job, the training operator's pods of a
PyTorchJob — never the same operator's pods of a TFJob, which no queue guard covers.
"""

from __future__ import annotations

from typing import Final

from components.k8s import Manifest
from components.model.queues import BUILT_IN, Queues, effective_integrations
from components.tenancy import policy

OWNERS_POLICY: Final = "gpuaas-team-queue-owners"

#: kube-controller-manager signs in as this unless ``--use-service-account-credentials``, then each
#: controller as its own kube-system ServiceAccount (kubernetes cmd/kube-controller-manager,
#: "controller roles" bootstrap policy). Team users are never these.
KCM: Final = "system:kube-controller-manager"


def kube_system(name: str) -> str:
    return f"system:serviceaccount:kube-system:{name}"


#: Kubernetes' own controllers that create objects in team namespaces.
KUBERNETES: Final[tuple[str, ...]] = (
    KCM,
    kube_system("job-controller"),
    kube_system("replicaset-controller"),
    kube_system("statefulset-controller"),
    kube_system("deployment-controller"),
    kube_system("cronjob-controller"),
)

#: child plural → (identities, owner API group, owner kind): which built-in controller creates
#: which children, for which owner. The CronJob controller's Jobs are not here: they carry the
#: CronJob's ``jobTemplate`` labels and are queued as themselves.
BUILT_IN_CHILDREN: Final[dict[str, tuple[tuple[tuple[str, ...], str, str], ...]]] = {
    "pods": (
        ((KCM, kube_system("job-controller")), "batch", "Job"),
        ((KCM, kube_system("replicaset-controller")), "apps", "ReplicaSet"),
        ((KCM, kube_system("statefulset-controller")), "apps", "StatefulSet"),
    ),
    "replicasets": (((KCM, kube_system("deployment-controller")), "apps", "Deployment"),),
}

#: The workload object of each integration, as its children's ownerReference names it.
OWNER_KIND: Final[dict[str, tuple[str, str]]] = {
    "batch/job": ("batch", "Job"),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "JobSet"),
    "kubeflow.org/pytorchjob": ("kubeflow.org", "PyTorchJob"),
    "kubeflow.org/mpijob": ("kubeflow.org", "MPIJob"),
    "deployment": ("apps", "Deployment"),
    "statefulset": ("apps", "StatefulSet"),
}

#: CEL: the object's controller ownerReferences (at most one, but a list reads without ``has``).
CONTROLLER_REFS: Final = (
    "has(object.metadata.ownerReferences) ? "
    "object.metadata.ownerReferences.filter(o, has(o.controller) && o.controller) : []"
)
OLD_CONTROLLER_REFS: Final = (
    "request.operation == 'UPDATE' && has(oldObject.metadata.ownerReferences) ? "
    "oldObject.metadata.ownerReferences.filter(o, has(o.controller) && o.controller) : []"
)


def kueue_identity(queues: Queues) -> str:
    """Kueue's manager: the chart's ServiceAccount ``<fullname>-controller-manager`` (release ``kueue``)."""
    return f"system:serviceaccount:{queues.namespace}:kueue-controller-manager"


def operators(queues: Queues) -> list[str]:
    """The usernames of ``queues.controllers``, in config order."""
    return [c.username for c in queues.controllers]


def trusted(queues: Queues) -> list[str]:
    """Every identity that may create objects with a controller ownerReference in team namespaces."""
    return [*KUBERNETES, *operators(queues)]


def cel_list(names: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


def _owned_by(group: str, kind: str) -> str:
    return f"variables.controllerRefs.exists(o, o.kind == '{kind}' && o.apiVersion.startsWith('{group}/'))"


def exempt_children(queues: Queues, plural: str) -> str:
    """CEL (``''`` when none): the request creates a child of a queued workload — its controller's
    identity *and* its controller ownerReference's kind together (module docstring).

    An operator's children are exempt only for kinds Kueue manages here (``queues.integrations``)
    and that operator lists; Kubernetes' own controllers for the kinds they own.
    """
    terms = [
        f"(request.userInfo.username in {cel_list(who)} && {_owned_by(group, kind)})"
        for who, group, kind in BUILT_IN_CHILDREN.get(plural, ())
    ]
    if plural in ("pods", "jobs"):
        enabled = effective_integrations(queues)
        for c in queues.controllers:
            kinds = [OWNER_KIND[i] for i in c.integrations if i in enabled and i not in BUILT_IN]
            if kinds:
                owned = " || ".join(_owned_by(g, k) for g, k in kinds)
                terms.append(f"(request.userInfo.username == '{c.username}' && ({owned}))")
    return " || ".join(terms)


#: ``kubectl create job --from=cronjob/x`` (kubectl ``create job``): a controller reference to a
#: CronJob, which Kueue does not know (no integration), so the Job is queued as itself.
_FROM_CRONJOB: Final = "(request.resource.resource == 'jobs' && o.apiVersion == 'batch/v1' && o.kind == 'CronJob')"
NO_FORGED_CONTROLLER: Final = (
    "variables.trusted || variables.controllerRefs.all(o, "
    f"variables.oldControllerRefs.exists(p, p.uid == o.uid) || {_FROM_CRONJOB})"
)


def owners_policy(queues: Queues, rules: list[tuple[str, str, str]]) -> Manifest:
    """No controller ownerReference on a team object but from a controller identity (module docstring).

    ``rules``: (group, version, plural) of every kind a queue guard covers. UPDATE too: a reference
    added later would turn a queued Job into another workload's child. Removing one is allowed
    (the garbage collector does when it orphans).
    """
    return policy.policy(
        OWNERS_POLICY,
        namespaces=policy.team_namespaces(),
        rules=[policy.resource_rule(g, v, ["CREATE", "UPDATE"], [p]) for g, v, p in rules],
        variables=[
            {"name": "controllerRefs", "expression": CONTROLLER_REFS},
            {"name": "oldControllerRefs", "expression": OLD_CONTROLLER_REFS},
            {"name": "trusted", "expression": f"request.userInfo.username in {cel_list(trusted(queues))}"},
        ],
        validations=[
            {
                "expression": NO_FORGED_CONTROLLER,
                "messageExpression": (
                    "'only workload controllers set a controller ownerReference in team namespaces (Kueue skips "
                    "the children of workloads it manages, so a forged one would run outside the queue); '"
                    " + request.userInfo.username + ' is not one of them (gpuaas:queues.controllers)'"
                ),
                "reason": "Forbidden",
            }
        ],
    )


def owners_binding() -> Manifest:
    return policy.binding(OWNERS_POLICY, policy.team_namespaces())
