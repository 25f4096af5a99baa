"""Only Kueue releases a held workload: no team member unsuspends a queued Job.

Kueue holds a workload it has not admitted by keeping it suspended (``spec.suspend: true`` on a
Job or JobSet, ``spec.runPolicy.suspend`` on the Kubeflow kinds) and admits it by setting that
false. Nothing stops the owner from doing the same (``kubectl patch job x -p
'{"spec":{"suspend":false}}'``): Kueue suspends it again at its next reconcile, but the Job's
pods run in between, on GPUs Kueue has lent to someone else. ``gpuaas-team-queue-suspend``
refuses, in every team namespace, an UPDATE that turns ``suspend`` from true to false on a
queue-managed workload (it carries ``kueue.x-k8s.io/queue-name``, or every workload is while
``queues.manageJobsWithoutQueueName``), unless the request is Kueue's own
(:func:`components.queueing.controllers.kueue_identity`) or an operator's of
``queues.controllers`` (the JobSet and MPI operators resume the child Jobs of a workload Kueue
released). Suspending stays free: a team may always give quota back.

Pods have no ``suspend``: Kueue holds them with a scheduling gate, and the team role may not
update pods at all (:mod:`components.tenancy.teams`).
"""

from __future__ import annotations

from typing import Final

from components.k8s import Manifest
from components.model.queues import Queues
from components.queueing.controllers import cel_list, kueue_identity, operators
from components.tenancy import policy

SUSPEND_POLICY: Final = "gpuaas-team-queue-suspend"

#: integration → (group, version, plural, CEL path of ``suspend`` below ``o``).
SUSPENDABLE: Final[dict[str, tuple[str, str, str, str]]] = {
    "batch/job": ("batch", "v1", "jobs", "spec"),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "v1alpha2", "jobsets", "spec"),
    "kubeflow.org/pytorchjob": ("kubeflow.org", "v1", "pytorchjobs", "spec.runPolicy"),
    "kubeflow.org/mpijob": ("kubeflow.org", "v2beta1", "mpijobs", "spec.runPolicy"),
}


def suspended(root: str, path: str) -> str:
    """CEL: ``<root>.<path>.suspend`` is true (absent reads as false, the API default)."""
    parts = path.split(".")
    guards = [f"has({root}.{'.'.join(parts[: i + 1])})" for i in range(len(parts))]
    return " && ".join([*guards, f"has({root}.{path}.suspend)", f"{root}.{path}.suspend"])


def _queued(queues: Queues) -> str:
    if queues.manage_jobs_without_queue_name:
        return "true"
    return (
        "has(oldObject.metadata.labels) && 'kueue.x-k8s.io/queue-name' in oldObject.metadata.labels"
        " && oldObject.metadata.labels['kueue.x-k8s.io/queue-name'] != ''"
    )


def suspend_policy(queues: Queues, integration: str) -> Manifest:
    """The guard on one suspendable kind (one policy per kind: each reads its own ``suspend`` path)."""
    group, version, plural, path = SUSPENDABLE[integration]
    allowed = [kueue_identity(queues), *operators(queues)]
    unsuspends = f"({suspended('oldObject', path)}) && !({suspended('object', path)})"
    return policy.policy(
        f"{SUSPEND_POLICY}-{plural}",
        namespaces=policy.team_namespaces(),
        rules=[policy.resource_rule(group, version, ["UPDATE"], [plural])],
        variables=[
            {"name": "queued", "expression": _queued(queues)},
            {"name": "unsuspends", "expression": unsuspends},
            {"name": "releaser", "expression": f"request.userInfo.username in {cel_list(allowed)}"},
        ],
        validations=[
            {
                "expression": "!variables.queued || !variables.unsuspends || variables.releaser",
                "messageExpression": (
                    f"'{plural} in a team namespace are released by Kueue alone: '"
                    " + request.userInfo.username + ' may not set suspend to false on a queued workload "
                    "(Kueue unsuspends it when it admits it; suspending stays allowed)'"
                ),
                "reason": "Forbidden",
            }
        ],
    )


def suspend_binding(integration: str) -> Manifest:
    plural = SUSPENDABLE[integration][2]
    return policy.binding(f"{SUSPEND_POLICY}-{plural}", policy.team_namespaces())
