"""The queue admission policies' real CEL text, evaluated with cel-python as the API server would.

Same harness as tests/tenancy/test_admission_cel.py (cel-go's library functions, RE2 ``matches``), with
``namespaceObject`` and the request's kind and operation in the activation: the policies read
the namespace's ``gpuaas.io/team`` label for the team's own queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

from components.loader import parse_config
from components.model.config import StackConfig
from components.queueing import admission, controllers
from components.tenancy.labels import TEAM_LABEL
from tests import tenancy_objects
from tests.conftest import raw_stack
from tests.tenancy.test_admission_cel import Policy

NS: Final = "vision"
QUEUE: Final = admission.QUEUE_LABEL


class QueuePolicy(Policy):
    """A queue policy: ``request`` of its own kind, ``namespaceObject`` of a team namespace."""

    def __init__(self, manifest: Mapping[str, Any], kind: str, group: str, plural: str = "") -> None:
        super().__init__(manifest)
        self.kind, self.group = kind, group
        self.plural = plural or kind.lower() + "s"

    def run(
        self,
        obj: Mapping[str, Any],
        operation: str = "CREATE",
        team: str = NS,
        old: Mapping[str, Any] | None = None,
        user: str = "alice",
    ) -> tuple[list[bool], list[str]]:
        """``old`` is the UPDATE's ``oldObject`` (default: ``obj`` itself, an update changing nothing)."""
        if operation == "UPDATE" and old is None:
            old = obj
        act: dict[str, Any] = {
            "object": json_to_cel(dict(obj)),
            "oldObject": json_to_cel(dict(old)) if old is not None else None,
            "params": None,
            "request": json_to_cel(
                {
                    "namespace": team,
                    "operation": operation,
                    "kind": {"group": self.group, "kind": self.kind},
                    "resource": {"group": self.group, "resource": self.plural},
                    "userInfo": {"username": user, "groups": ["gpuaas:team:" + team, "system:authenticated"]},
                }
            ),
            "namespaceObject": json_to_cel({"metadata": {"name": team, "labels": {TEAM_LABEL: team}}}),
        }
        values: dict[celtypes.StringType, Any] = {}
        for name, program in self.variables:
            act["variables"] = celtypes.MapType(values)
            values[celtypes.StringType(name)] = program.evaluate(act)
        act["variables"] = celtypes.MapType(values)
        results = []
        for program in self.validations:
            value = program.evaluate(act)
            assert isinstance(value, celtypes.BoolType), f"validation gave {value!r}"
            results.append(bool(value))
        static = [v.get("message", "") for v in self.manifest["spec"]["validations"]]
        messages = [
            str(m.evaluate(act)) if m else text
            for m, text, ok in zip(self.messages, static, results, strict=True)
            if not ok
        ]
        return results, messages


def _cfg(**queues: Any) -> StackConfig:
    raw = raw_stack("onprem")
    raw["queues"].update(queues)
    return parse_config(raw)


KIND: Final = {
    "pods": "Pod",
    "jobs": "Job",
    "jobsets": "JobSet",
    "pytorchjobs": "PyTorchJob",
    "mpijobs": "MPIJob",
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "replicasets": "ReplicaSet",
}


def _policies(cfg: StackConfig) -> dict[str, QueuePolicy]:
    objects = admission.queue_admission_objects(cfg.queues)
    out = {}
    kinds = [(group, plural) for _i, group, _v, plural, _s in admission.KINDS]
    kinds += [("apps", plural) for plural in admission.APPS_KINDS]
    for group, plural in kinds:
        role = f"{plural}-queue-policy"
        if role in objects:
            out[plural] = QueuePolicy(objects[role], KIND[plural], group, plural)
    return out


DEFAULT: Final = _policies(_cfg())


def container(**requests: str) -> dict[str, Any]:
    return (
        {"name": "main", "image": "busybox", "resources": {"requests": dict(requests)}}
        if requests
        else {
            "name": "main",
            "image": "busybox",
        }
    )


def pod_spec(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [container()]}
    if init is not None:
        spec["initContainers"] = init
    return spec


def meta(queue: str | None = None, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": "w", "namespace": NS, **extra}
    if queue is not None:
        m["labels"] = {QUEUE: queue}
    return m


def job(spec: dict[str, Any], queue: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(queue, **extra),
        "spec": {"suspend": True, "template": {"spec": spec}},
    }


def owner(kind: str, api_version: str, uid: str = "1", controller: bool = True) -> list[dict[str, Any]]:
    return [{"apiVersion": api_version, "kind": kind, "name": "w", "uid": uid, "controller": controller}]


def pod(spec: dict[str, Any], queue: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta(queue, **extra), "spec": spec}


GPU = container(**{"nvidia.com/gpu": "1"})
MIG = container(**{"nvidia.com/mig-1g.10gb": "1"})
SHARED = container(**{"nvidia.com/gpu.shared": "1"})
CPU = container(cpu="1")
VF = container(**{"nvidia.com/sriov8001": "1"})
RDMA = container(**{"rdma/hcashared": "1"})

KCM: Final = controllers.KCM
JOB_CONTROLLER: Final = controllers.kube_system("job-controller")
RS_CONTROLLER: Final = controllers.kube_system("replicaset-controller")
STS_CONTROLLER: Final = controllers.kube_system("statefulset-controller")
DEPLOYMENT_CONTROLLER: Final = controllers.kube_system("deployment-controller")
TRAINING: Final = "system:serviceaccount:kubeflow:training-operator"
MPI: Final = "system:serviceaccount:mpi-operator:mpi-operator"
JOBSET: Final = "system:serviceaccount:jobset-system:jobset-controller-manager"
KUEUE: Final = "system:serviceaccount:kueue-system:kueue-controller-manager"


@pytest.mark.parametrize(
    ("case", "obj", "ok"),
    [
        ("GPU Job naming its own queue", job(pod_spec(GPU), "vision"), [True, True, True]),
        ("GPU Job naming another team's queue", job(pod_spec(GPU), "speech"), [False, True, False]),
        ("GPU Job naming no queue", job(pod_spec(GPU)), [True, True, False]),
        ("MIG Job naming no queue", job(pod_spec(CPU, MIG)), [True, True, False]),
        ("time-sliced GPU in an init container, no queue", job(pod_spec(CPU, init=[SHARED])), [True, True, False]),
        (
            "GPU as a limit only, no queue",
            job(pod_spec({"name": "m", "resources": {"limits": {"nvidia.com/gpu": "1"}}})),
            [True, True, False],
        ),
        ("CPU Job naming no queue", job(pod_spec(CPU)), [True, True, True]),
        # Item 6: the VF budget of quota and queue is one only if every VF goes through the queue.
        ("RDMA-only Job (a VF) naming no queue", job(pod_spec(VF)), [True, True, False]),
        ("RDMA shared device naming no queue", job(pod_spec(RDMA)), [True, True, False]),
        ("RDMA-only Job naming its queue", job(pod_spec(VF), "vision"), [True, True, True]),
        ("CPU Job naming another team's queue", job(pod_spec(CPU), "speech"), [False, True, True]),
        ("a prefix of its own queue", job(pod_spec(GPU), "vision-x"), [False, True, False]),
    ],
)
def test_job_policy(case: str, obj: dict[str, Any], ok: list[bool]) -> None:
    results, messages = DEFAULT["jobs"].run(obj)
    assert results == ok, case
    if not ok[0]:
        assert any("may name only LocalQueue vision" in m for m in messages)
    if not ok[2]:
        assert any(f"add the label {QUEUE}: vision" in m for m in messages)


def test_relabel_to_another_queue_is_refused_on_update() -> None:
    old = job(pod_spec(GPU), "vision")
    assert DEFAULT["jobs"].run(job(pod_spec(GPU), "speech"), operation="UPDATE", old=old)[0] == [False, False, True]
    assert DEFAULT["jobs"].run(old, operation="UPDATE", old=old)[0] == [True, True, True]


@pytest.mark.parametrize(
    ("case", "old_queue", "new_queue", "ok"),
    [
        ("removing the label from a suspended labelled Job", "vision", None, False),
        ("adding the label to an old unlabelled Job", None, "vision", False),
        ("an old unlabelled Job updated without a label", None, None, True),
        ("a labelled Job updated keeping its label", "vision", "vision", True),
    ],
)
def test_queue_label_is_immutable(case: str, old_queue: str | None, new_queue: str | None, ok: bool) -> None:
    for plural, make in (("jobs", job), ("pods", pod)):
        results, messages = DEFAULT[plural].run(
            make(pod_spec(GPU), new_queue), operation="UPDATE", old=make(pod_spec(GPU), old_queue)
        )
        assert results[1] is ok, (plural, case)
        assert all(results[i] for i in (0, 2)), (plural, case)
        assert ok or any("cannot be added, changed or removed" in m for m in messages)


def test_queue_label_is_immutable_for_every_covered_kind() -> None:
    specs = {"pods": pod_spec(CPU), "jobs": {"template": {"spec": pod_spec(CPU)}}}
    apps = {"template": {"spec": pod_spec(CPU)}}
    assert set(DEFAULT) == set(KIND), "every kind the team may write (and the integrations) has its policy"
    for plural, policy in DEFAULT.items():
        spec = specs.get(plural, apps if plural in ("deployments", "statefulsets", "replicasets") else {})
        labelled, bare = {"metadata": meta("vision"), "spec": spec}, {"metadata": meta(), "spec": spec}
        assert policy.run(bare, operation="UPDATE", old=labelled)[0][1] is False, plural
        assert policy.run(labelled, operation="UPDATE", old=labelled)[0][1] is True, plural
        assert policy.run(labelled)[0][1] is True, plural  # CREATE: no oldObject


def test_each_team_names_only_its_own_queue() -> None:
    obj = job(pod_spec(GPU), "speech")
    obj["metadata"]["namespace"] = "speech"
    assert DEFAULT["jobs"].run(obj, team="speech")[0] == [True, True, True]
    assert DEFAULT["jobs"].run(obj, team="vision")[0] == [False, True, False]


@pytest.mark.parametrize(
    ("case", "obj", "ok"),
    [
        ("plain GPU pod with its queue", pod(pod_spec(GPU), "vision"), [True, True, True]),
        ("plain GPU pod without a queue", pod(pod_spec(GPU)), [True, True, False]),
        (
            "a forged controller owner does not exempt",
            pod(pod_spec(GPU), ownerReferences=owner("ConfigMap", "v1")),
            [True, True, False],
        ),
        (
            "nor does a forged Job owner",
            pod(pod_spec(GPU), ownerReferences=owner("Job", "batch/v1")),
            [True, True, False],
        ),
        ("plain CPU pod", pod(pod_spec(CPU)), [True, True, True]),
        ("a pod naming another team's queue", pod(pod_spec(CPU), "speech"), [False, True, True]),
    ],
)
def test_pod_policy(case: str, obj: dict[str, Any], ok: list[bool]) -> None:
    assert DEFAULT["pods"].run(obj)[0] == ok, case


# --------------------------------------------------------------------------------------------
# children of queued workloads: exempt by the creator's identity and the owner's kind together


@pytest.mark.parametrize(
    ("plural", "user", "owner_kind", "api_version", "exempt"),
    [
        ("pods", KCM, "Job", "batch/v1", True),
        ("pods", JOB_CONTROLLER, "Job", "batch/v1", True),
        ("pods", KCM, "ReplicaSet", "apps/v1", True),
        ("pods", RS_CONTROLLER, "ReplicaSet", "apps/v1", True),
        ("pods", STS_CONTROLLER, "StatefulSet", "apps/v1", True),
        ("pods", JOB_CONTROLLER, "ReplicaSet", "apps/v1", False),  # the wrong controller for the kind
        ("pods", KCM, "DaemonSet", "apps/v1", False),  # no queue guard covers DaemonSets
        ("pods", TRAINING, "PyTorchJob", "kubeflow.org/v1", True),
        ("pods", TRAINING, "TFJob", "kubeflow.org/v1", False),  # item 4: no queue guard covers TFJobs
        ("pods", TRAINING, "XGBoostJob", "kubeflow.org/v1", False),
        ("pods", MPI, "MPIJob", "kubeflow.org/v2beta1", True),
        ("jobs", MPI, "MPIJob", "kubeflow.org/v2beta1", True),  # the launcher Job
        ("jobs", JOBSET, "JobSet", "jobset.x-k8s.io/v1alpha2", True),
        ("jobs", JOBSET, "Job", "batch/v1", False),
        ("jobs", KCM, "CronJob", "batch/v1", False),  # a CronJob's Jobs carry its jobTemplate's label
        ("replicasets", DEPLOYMENT_CONTROLLER, "Deployment", "apps/v1", True),
        ("replicasets", KCM, "Deployment", "apps/v1", True),
        ("replicasets", "alice", "Deployment", "apps/v1", False),
        ("pods", "alice", "Job", "batch/v1", False),
        ("pods", "system:serviceaccount:vision:default", "Job", "batch/v1", False),
        ("pods", "system:serviceaccount:kube-system:job-controller-x", "Job", "batch/v1", False),
    ],
)
def test_children_are_exempt_by_kind_and_identity_together(
    plural: str, user: str, owner_kind: str, api_version: str, exempt: bool
) -> None:
    spec = pod_spec(GPU)
    obj = (
        pod(spec, ownerReferences=owner(owner_kind, api_version))
        if plural == "pods"
        else {"metadata": meta(ownerReferences=owner(owner_kind, api_version)), "spec": {"template": {"spec": spec}}}
    )
    results, _messages = DEFAULT[plural].run(obj, user=user)
    assert results[2] is exempt, (plural, user, owner_kind)
    # The same creator without the owner is never exempt ...
    bare = pod(spec) if plural == "pods" else {"metadata": meta(), "spec": {"template": {"spec": spec}}}
    assert DEFAULT[plural].run(bare, user=user)[0][2] is False
    # ... and an exempt child still may not name another team's queue.
    obj["metadata"]["labels"] = {QUEUE: "speech"}
    assert DEFAULT[plural].run(obj, user=user)[0][0] is False


def test_an_operators_children_are_exempt_only_for_enabled_integrations() -> None:
    policies = _policies(_cfg(integrations=["batch/job", "pod"]))
    child = pod(pod_spec(GPU), ownerReferences=owner("PyTorchJob", "kubeflow.org/v1"))
    assert policies["pods"].run(child, user=TRAINING)[0] == [True, True, False]
    assert DEFAULT["pods"].run(child, user=TRAINING)[0] == [True, True, True]


def test_controllers_are_configuration() -> None:
    ray = {"serviceAccount": "ray-system/kuberay-operator", "integrations": ["kubeflow.org/pytorchjob"]}
    policies = _policies(_cfg(controllers=[ray]))
    child = pod(pod_spec(GPU), ownerReferences=owner("PyTorchJob", "kubeflow.org/v1"))
    assert policies["pods"].run(child, user="system:serviceaccount:ray-system:kuberay-operator")[0][2] is True
    # the upstream default is no longer trusted once the list is replaced
    assert policies["pods"].run(child, user=TRAINING)[0][2] is False


# --------------------------------------------------------------------------------------------
# item 2: no controller ownerReference but from a controller; item 3: no unsuspend but Kueue's


def _guard(role: str, plural: str, cfg: StackConfig | None = None) -> QueuePolicy:
    objects = admission.queue_admission_objects((cfg or _cfg()).queues)
    group = {"pods": "", "jobs": "batch", "jobsets": "jobset.x-k8s.io", "pytorchjobs": "kubeflow.org"}[plural]
    return QueuePolicy(objects[role], KIND[plural], group, plural)


OWNERS: Final = _guard("owners-queue-policy", "pods")
OWNERS_JOBS: Final = _guard("owners-queue-policy", "jobs")


def test_the_forged_owner_attack_is_refused_and_the_controllers_pass() -> None:
    """The issue's attack: a bare GPU pod, labelled with the team's queue, claiming a suspended Job
    as its controller (Kueue would skip it). Refused for the team; the Job controller's own pod passes."""
    attack = pod(pod_spec(GPU), "vision", ownerReferences=owner("Job", "batch/v1"))
    results, messages = OWNERS.run(attack, user="alice")
    assert results == [False]
    assert "only workload controllers set a controller ownerReference" in messages[0] and "alice" in messages[0]
    assert DEFAULT["pods"].run(attack, user="alice")[0] == [True, True, True], "the queue policy alone admits it"
    for user in (KCM, JOB_CONTROLLER, TRAINING, "system:serviceaccount:vision:default"):
        assert OWNERS.run(attack, user=user)[0] == [user != "system:serviceaccount:vision:default"], user
    # the allowed twins of the team: no ownerReference, or one that is not a controller's
    assert OWNERS.run(pod(pod_spec(GPU), "vision"), user="alice")[0] == [True]
    loose = pod(pod_spec(GPU), "vision", ownerReferences=owner("Job", "batch/v1", controller=False))
    assert OWNERS.run(loose, user="alice")[0] == [True]


def test_kubectl_create_job_from_a_cronjob_is_allowed() -> None:
    from_cron = job(pod_spec(GPU), "vision", ownerReferences=owner("CronJob", "batch/v1"))
    assert OWNERS_JOBS.run(from_cron, user="alice")[0] == [True]
    assert OWNERS.run(pod(pod_spec(GPU), ownerReferences=owner("CronJob", "batch/v1")), user="alice")[0] == [False]
    assert OWNERS_JOBS.run(job(pod_spec(GPU), ownerReferences=owner("JobSet", "jobset.x-k8s.io/v1alpha2")))[0] == [
        False
    ]


def test_a_controller_reference_added_on_update_is_refused() -> None:
    bare = job(pod_spec(GPU), "vision")
    owned = job(pod_spec(GPU), "vision", ownerReferences=owner("JobSet", "jobset.x-k8s.io/v1alpha2"))
    assert OWNERS_JOBS.run(owned, operation="UPDATE", old=bare, user="alice")[0] == [False]
    swapped = job(pod_spec(GPU), "vision", ownerReferences=owner("JobSet", "jobset.x-k8s.io/v1alpha2", uid="2"))
    assert OWNERS_JOBS.run(swapped, operation="UPDATE", old=owned, user="alice")[0] == [False]
    # twins: an update keeping it, removing it (the garbage collector orphaning), or by its controller
    assert OWNERS_JOBS.run(owned, operation="UPDATE", old=owned, user="alice")[0] == [True]
    assert OWNERS_JOBS.run(bare, operation="UPDATE", old=owned, user="alice")[0] == [True]
    assert OWNERS_JOBS.run(owned, operation="UPDATE", old=bare, user=JOBSET)[0] == [True]


def test_the_owners_guard_covers_every_queued_kind() -> None:
    objects = admission.queue_admission_objects(_cfg().queues)
    rules = objects["owners-queue-policy"]["spec"]["matchConstraints"]["resourceRules"]
    assert {r["resources"][0] for r in rules} == set(KIND)
    assert all(r["operations"] == ["CREATE", "UPDATE"] for r in rules)
    assert objects["owners-queue-binding"]["spec"]["policyName"] == controllers.OWNERS_POLICY


SUSPEND_JOBS: Final = _guard("jobs-suspend-policy", "jobs")


def _suspended(obj: dict[str, Any], value: bool) -> dict[str, Any]:
    out = {**obj, "spec": {**obj["spec"], "suspend": value}}
    return out


def test_a_member_cannot_unsuspend_a_queued_job() -> None:
    held = job(pod_spec(GPU), "vision")
    results, messages = SUSPEND_JOBS.run(_suspended(held, False), operation="UPDATE", old=held, user="alice")
    assert results == [False]
    assert "released by Kueue alone" in messages[0] and "alice" in messages[0]
    gone = {**held, "spec": {k: v for k, v in held["spec"].items() if k != "suspend"}}
    assert SUSPEND_JOBS.run(gone, operation="UPDATE", old=held, user="alice")[0] == [False], "suspend removed"
    # twins: Kueue admitting it; an operator resuming a child; suspending; an update that keeps it held
    assert SUSPEND_JOBS.run(_suspended(held, False), operation="UPDATE", old=held, user=KUEUE)[0] == [True]
    assert SUSPEND_JOBS.run(_suspended(held, False), operation="UPDATE", old=held, user=JOBSET)[0] == [True]
    running = _suspended(held, False)
    assert SUSPEND_JOBS.run(held, operation="UPDATE", old=running, user="alice")[0] == [True]
    assert SUSPEND_JOBS.run(held, operation="UPDATE", old=held, user="alice")[0] == [True]
    # an unqueued (CPU) Job is the team's own to resume
    cpu = job(pod_spec(CPU))
    assert SUSPEND_JOBS.run(_suspended(cpu, False), operation="UPDATE", old=cpu, user="alice")[0] == [True]


def test_with_manage_jobs_without_queue_name_every_job_is_held() -> None:
    cfg = _cfg(manageJobsWithoutQueueName=True)
    guard = _guard("jobs-suspend-policy", "jobs", cfg)
    cpu = job(pod_spec(CPU))
    assert guard.run(_suspended(cpu, False), operation="UPDATE", old=cpu, user="alice")[0] == [False]
    assert guard.run(_suspended(cpu, False), operation="UPDATE", old=cpu, user=KUEUE)[0] == [True]


def test_the_kubeflow_kinds_are_held_by_run_policy() -> None:
    guard = _guard("pytorchjobs-suspend-policy", "pytorchjobs")

    def ptj(suspend: bool | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"pytorchReplicaSpecs": {}}
        if suspend is not None:
            spec["runPolicy"] = {"suspend": suspend}
        return {"metadata": meta("vision"), "spec": spec}

    assert guard.run(ptj(False), operation="UPDATE", old=ptj(True), user="alice")[0] == [False]
    assert guard.run(ptj(None), operation="UPDATE", old=ptj(True), user="alice")[0] == [False]
    assert guard.run(ptj(False), operation="UPDATE", old=ptj(True), user=KUEUE)[0] == [True]
    assert guard.run(ptj(True), operation="UPDATE", old=ptj(False), user="alice")[0] == [True]
    assert guard.run(ptj(None), operation="UPDATE", old=ptj(None), user="alice")[0] == [True]


def test_suspend_guards_follow_the_integrations_and_kueues_namespace() -> None:
    objects = admission.queue_admission_objects(_cfg(integrations=["batch/job", "pod"], namespace="queues").queues)
    assert {r for r in objects if "suspend" in r} == {"jobs-suspend-policy", "jobs-suspend-binding"}
    guard = QueuePolicy(objects["jobs-suspend-policy"], "Job", "batch", "jobs")
    held = job(pod_spec(GPU), "vision")
    moved = "system:serviceaccount:queues:kueue-controller-manager"
    assert guard.run(_suspended(held, False), operation="UPDATE", old=held, user=moved)[0] == [True]
    assert guard.run(_suspended(held, False), operation="UPDATE", old=held, user=KUEUE)[0] == [False]


def _claims(*names: str) -> dict[str, Any]:
    spec = pod_spec(container())
    spec["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": n} for n in names]
    return spec


def test_a_dra_claim_is_a_gpu_request() -> None:
    assert DEFAULT["jobs"].run(job(_claims("gpu")))[0] == [True, True, False]
    assert DEFAULT["jobs"].run(job(_claims("gpu"), "vision"))[0] == [True, True, True]
    assert DEFAULT["jobs"].run(job(_claims()))[0] == [True, True, True]
    assert DEFAULT["pods"].run(pod(_claims("gpu")))[0] == [True, True, False]


# --------------------------------------------------------------------------------------------
# apps: Deployments and StatefulSets through Kueue's integrations; ReplicaSets only from a Deployment


def _apps(plural: str, spec: dict[str, Any], queue: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": KIND[plural],
        "metadata": meta(queue, **extra),
        "spec": {"template": {"spec": spec}},
    }


@pytest.mark.parametrize("plural", ["deployments", "statefulsets"])
def test_gpu_deployments_and_statefulsets_go_through_the_queue(plural: str) -> None:
    policy = DEFAULT[plural]
    for spec in (pod_spec(GPU), pod_spec(CPU, init=[MIG]), _claims("gpu"), pod_spec(VF)):
        results, messages = policy.run(_apps(plural, spec))
        assert results == [True, True, False], plural
        assert f"add the label {QUEUE}: vision" in messages[0]
        assert policy.run(_apps(plural, spec, "vision"))[0] == [True, True, True]
    assert policy.run(_apps(plural, pod_spec(CPU)))[0] == [True, True, True]
    # An update turning an unqueued CPU template into a GPU one is refused; a GPU template made
    # before elastic quotas (no label) may still be updated and rolled out.
    cpu, gpu = _apps(plural, pod_spec(CPU)), _apps(plural, pod_spec(GPU))
    assert policy.run(gpu, operation="UPDATE", old=cpu)[0] == [True, True, False]
    assert policy.run(gpu, operation="UPDATE", old=gpu)[0] == [True, True, True]
    assert policy.run(cpu, operation="UPDATE", old=gpu)[0] == [True, True, True]


@pytest.mark.parametrize("plural", ["deployments", "statefulsets"])
def test_without_their_integration_gpu_deployments_are_refused(plural: str) -> None:
    policy = _policies(_cfg(integrations=["batch/job", "pod"]))[plural]
    results, messages = policy.run(_apps(plural, pod_spec(GPU), "vision"))
    assert results == [True, True, False]
    assert "not managed by Kueue here" in messages[0] and "lacks" in messages[0]
    assert policy.run(_apps(plural, pod_spec(CPU)))[0] == [True, True, True]


def test_replicasets_hold_gpus_only_for_a_deployment() -> None:
    """Item 8: a rollout of a GPU Deployment made before elastic quotas creates a new ReplicaSet."""
    policy = DEFAULT["replicasets"]
    rollout = _apps("replicasets", pod_spec(GPU), ownerReferences=owner("Deployment", "apps/v1"))
    assert policy.run(rollout, user=DEPLOYMENT_CONTROLLER)[0] == [True, True, True]
    assert policy.run(rollout, user=KCM)[0] == [True, True, True]
    for user in ("alice", DEPLOYMENT_CONTROLLER):
        bare = _apps("replicasets", pod_spec(GPU), "vision")
        results, messages = policy.run(bare, user=user)
        assert results == [True, True, False]
        assert "Kueue has no integration for them" in messages[0]
    assert policy.run(rollout, user="alice")[0] == [True, True, False]
    assert policy.run(_apps("replicasets", pod_spec(CPU)))[0] == [True, True, True]
    cpu, gpu = _apps("replicasets", pod_spec(CPU)), _apps("replicasets", pod_spec(GPU))
    assert policy.run(gpu, operation="UPDATE", old=cpu)[0] == [True, True, False]
    assert policy.run(gpu, operation="UPDATE", old=gpu)[0] == [True, True, True]


def test_apps_policies_cover_what_the_team_role_may_write() -> None:
    cfg = _cfg()
    written = {
        r
        for rule in tenancy_objects.cluster_role(cfg)["rules"]
        if "create" in rule["verbs"]
        for r in rule["resources"]
        if "/" not in r and rule["apiGroups"] != [""]
    }
    objects = admission.queue_admission_objects(cfg.queues)
    covered = {
        r
        for role, obj in objects.items()
        if role.endswith("-queue-policy") and role != "owners-queue-policy"
        for rule in obj["spec"]["matchConstraints"]["resourceRules"]
        for r in rule["resources"]
    }
    # every workload kind a member may create has a queue guard (cronjobs: their Jobs do)
    assert written - {"cronjobs", "resourceclaims", "resourceclaimtemplates"} <= covered, written - covered


def _replicas(field: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {field: {"Master": {"template": {"spec": spec}}, "Worker": {"template": {"spec": pod_spec(CPU)}}}}


@pytest.mark.parametrize(
    ("plural", "spec_of"),
    [
        ("jobsets", lambda s: {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": {"spec": s}}}}]}),
        ("pytorchjobs", lambda s: _replicas("pytorchReplicaSpecs", s)),
        ("mpijobs", lambda s: _replicas("mpiReplicaSpecs", s)),
    ],
)
def test_training_kinds_find_gpus_in_every_replica(plural: str, spec_of: Any) -> None:
    policy = DEFAULT[plural]
    for spec, queue, ok in (
        (pod_spec(GPU), None, [True, True, False]),
        (pod_spec(GPU), "vision", [True, True, True]),
        (pod_spec(GPU), "speech", [False, True, False]),
        (pod_spec(CPU), None, [True, True, True]),
    ):
        obj = {"metadata": meta(queue), "spec": spec_of(spec)}
        assert policy.run(obj)[0] == ok, (plural, queue)
    assert policy.run({"metadata": meta(), "spec": {}})[0] == [True, True, True]


def test_manage_jobs_without_queue_name_drops_the_label_requirement_only() -> None:
    policies = _policies(_cfg(manageJobsWithoutQueueName=True))
    assert len(policies["jobs"].validations) == 2
    assert policies["jobs"].run(job(pod_spec(GPU)))[0] == [True, True]
    assert policies["jobs"].run(job(pod_spec(GPU), "speech"))[0] == [False, True]
    assert len(policies["replicasets"].validations) == 3, "ReplicaSets are never Kueue's"


def test_pods_outside_the_integrations_cannot_be_queued() -> None:
    policies = _policies(_cfg(integrations=["batch/job"]))
    assert set(policies) == {"pods", "jobs", "deployments", "statefulsets", "replicasets"}
    results, messages = policies["pods"].run(pod(pod_spec(GPU), "vision"))
    assert results == [True, True, False]
    assert "lacks pod" in messages[0]
    assert policies["pods"].run(pod(pod_spec(CPU)))[0] == [True, True, True]
    child = pod(pod_spec(GPU), ownerReferences=owner("Job", "batch/v1"))
    assert policies["pods"].run(child, user=JOB_CONTROLLER)[0] == [True, True, True]


def test_deployment_integrations_imply_pods() -> None:
    policies = _policies(_cfg(integrations=["batch/job", "deployment"]))
    assert policies["pods"].run(pod(pod_spec(GPU), "vision"))[0] == [True, True, True]


def test_policies_select_team_namespaces_and_their_kind() -> None:
    objects = admission.queue_admission_objects(_cfg().queues)
    for role, obj in objects.items():
        selector = (
            obj["spec"]["matchConstraints"]["namespaceSelector"]
            if role.endswith("-policy")
            else obj["spec"]["matchResources"]["namespaceSelector"]
        )
        assert selector == {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}
    jobs = objects["jobs-queue-policy"]["spec"]["matchConstraints"]["resourceRules"]
    assert jobs == [
        {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]}
    ]
    assert objects["jobs-queue-binding"]["spec"]["validationActions"] == ["Deny"]
    suspend = objects["jobs-suspend-policy"]["spec"]["matchConstraints"]["resourceRules"]
    assert suspend == [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["jobs"]}]
