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
from components.queueing import admission
from components.tenancy.labels import TEAM_LABEL
from tests.conftest import raw_stack
from tests.tenancy.test_admission_cel import Policy

NS: Final = "vision"
QUEUE: Final = admission.QUEUE_LABEL


class QueuePolicy(Policy):
    """A queue policy: ``request`` of its own kind, ``namespaceObject`` of a team namespace."""

    def __init__(self, manifest: Mapping[str, Any], kind: str, group: str) -> None:
        super().__init__(manifest)
        self.kind, self.group, self.manifest = kind, group, manifest

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


def _policies(cfg: StackConfig) -> dict[str, QueuePolicy]:
    objects = admission.queue_admission_objects(cfg)
    out = {}
    kinds = [(group, plural) for _i, group, _v, plural, _s in admission.KINDS]
    kinds += [("apps", plural) for plural in admission.APPS_KINDS]
    kind = {
        "pods": "Pod",
        "jobs": "Job",
        "jobsets": "JobSet",
        "pytorchjobs": "PyTorchJob",
        "mpijobs": "MPIJob",
        "deployments": "Deployment",
        "statefulsets": "StatefulSet",
        "replicasets": "ReplicaSet",
    }
    for group, plural in kinds:
        role = f"{plural}-queue-policy"
        if role in objects:
            out[plural] = QueuePolicy(objects[role], kind[plural], group)
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


def job(spec: dict[str, Any], queue: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(queue),
        "spec": {"suspend": True, "template": {"spec": spec}},
    }


def pod(spec: dict[str, Any], queue: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta(queue, **extra), "spec": spec}


GPU = container(**{"nvidia.com/gpu": "1"})
MIG = container(**{"nvidia.com/mig-1g.10gb": "1"})
SHARED = container(**{"nvidia.com/gpu.shared": "1"})
CPU = container(cpu="1")
VF = container(**{"nvidia.com/sriov8001": "1"})


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
        ("RDMA-only Job (a VF is not a GPU) naming no queue", job(pod_spec(VF)), [True, True, True]),
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
    for plural, policy in DEFAULT.items():
        spec = specs.get(plural, {})
        labelled, bare = {"metadata": meta("vision"), "spec": spec}, {"metadata": meta(), "spec": spec}
        if plural in admission.APPS_KINDS:
            assert policy.validations[0] is not None and len(policy.validations) == 1
            continue
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
            pod(
                pod_spec(GPU),
                ownerReferences=[
                    {"kind": "ConfigMap", "name": "w", "uid": "1", "controller": True, "apiVersion": "v1"}
                ],
            ),
            [True, True, False],
        ),
        (
            "nor does a forged Job owner",
            pod(
                pod_spec(GPU),
                ownerReferences=[
                    {"kind": "Job", "name": "w", "uid": "1", "controller": True, "apiVersion": "batch/v1"}
                ],
            ),
            [True, True, False],
        ),
        ("plain CPU pod", pod(pod_spec(CPU)), [True, True, True]),
        ("a pod naming another team's queue", pod(pod_spec(CPU), "speech"), [False, True, True]),
    ],
)
def test_pod_policy(case: str, obj: dict[str, Any], ok: list[bool]) -> None:
    assert DEFAULT["pods"].run(obj)[0] == ok, case


@pytest.mark.parametrize("user", admission.POD_CONTROLLERS)
def test_pods_created_by_a_workload_controller_are_exempt(user: str) -> None:
    assert DEFAULT["pods"].run(pod(pod_spec(GPU)), user=user)[0] == [True, True, True]
    # ... but they still may not name another team's queue
    assert DEFAULT["pods"].run(pod(pod_spec(GPU), "speech"), user=user)[0] == [False, True, True]


@pytest.mark.parametrize(
    "user",
    ["alice", "system:serviceaccount:vision:default", "system:serviceaccount:kube-system:job-controller-x"],
)
def test_a_team_user_or_service_account_is_not_a_controller(user: str) -> None:
    assert DEFAULT["pods"].run(pod(pod_spec(GPU)), user=user)[0] == [True, True, False]
    assert DEFAULT["jobs"].run(job(pod_spec(GPU)), user=user)[0] == [True, True, False]


def test_jobs_of_a_jobset_are_exempt_but_not_those_of_a_cronjob() -> None:
    jobset = "system:serviceaccount:jobset-system:jobset-controller-manager"
    assert DEFAULT["jobs"].run(job(pod_spec(GPU)), user=jobset)[0] == [True, True, True]
    # kube-controller-manager without --use-service-account-credentials is also the CronJob
    # controller: a CronJob's Jobs carry the label from its jobTemplate.
    assert DEFAULT["jobs"].run(job(pod_spec(GPU)), user=admission.KCM)[0] == [True, True, False]
    assert DEFAULT["jobs"].run(job(pod_spec(GPU), "vision"), user=admission.KCM)[0] == [True, True, True]


def _claims(*names: str) -> dict[str, Any]:
    spec = pod_spec(container())
    spec["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": n} for n in names]
    return spec


def test_a_dra_claim_is_a_gpu_request() -> None:
    assert DEFAULT["jobs"].run(job(_claims("gpu")))[0] == [True, True, False]
    assert DEFAULT["jobs"].run(job(_claims("gpu"), "vision"))[0] == [True, True, True]
    assert DEFAULT["jobs"].run(job(_claims()))[0] == [True, True, True]
    assert DEFAULT["pods"].run(pod(_claims("gpu")))[0] == [True, True, False]


def _apps(plural: str, spec: dict[str, Any], queue: str | None = None) -> dict[str, Any]:
    kind = {"deployments": "Deployment", "statefulsets": "StatefulSet", "replicasets": "ReplicaSet"}[plural]
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta(queue), "spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize("plural", admission.APPS_KINDS)
def test_apps_kinds_cannot_hold_gpus(plural: str) -> None:
    policy = DEFAULT[plural]
    for spec in (pod_spec(GPU), pod_spec(CPU, init=[MIG]), _claims("gpu")):
        for queue in (None, "vision"):
            results, messages = policy.run(_apps(plural, spec, queue))
            assert results == [False], (plural, queue)
            assert "not managed by Kueue here" in messages[0] and f"{QUEUE}: vision" in messages[0]
    assert policy.run(_apps(plural, pod_spec(CPU)))[0] == [True]
    assert policy.run(_apps(plural, pod_spec(VF)))[0] == [True]
    # An update turning a CPU template into a GPU one is refused; one of a GPU template made
    # before the policy (a controller scaling its ReplicaSet) passes, as does a CPU update.
    cpu, gpu = _apps(plural, pod_spec(CPU)), _apps(plural, pod_spec(GPU))
    assert policy.run(gpu, operation="UPDATE", old=cpu)[0] == [False]
    assert policy.run(gpu, operation="UPDATE", old=gpu)[0] == [True]
    assert policy.run(cpu, operation="UPDATE", old=gpu)[0] == [True]


def test_apps_policies_cover_what_the_team_role_may_write() -> None:
    from components.tenancy.teams import cluster_role

    written = {
        r
        for rule in cluster_role()["rules"]
        if "apps" in rule["apiGroups"] and "create" in rule["verbs"]
        for r in rule["resources"]
        if "/" not in r
    }
    objects = admission.queue_admission_objects(_cfg())
    covered = {
        r
        for role, obj in objects.items()
        if role.endswith("-policy")
        for rule in obj["spec"]["matchConstraints"]["resourceRules"]
        if rule["apiGroups"] == ["apps"]
        for r in rule["resources"]
    }
    assert written and written <= covered


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


def test_pods_outside_the_integrations_cannot_be_queued() -> None:
    policies = _policies(_cfg(integrations=["batch/job"]))
    assert set(policies) == {"pods", "jobs", *admission.APPS_KINDS}
    results, messages = policies["pods"].run(pod(pod_spec(GPU), "vision"))
    assert results == [True, True, False]
    assert "lacks pod" in messages[0]
    assert policies["pods"].run(pod(pod_spec(CPU)))[0] == [True, True, True]
    job_controller = "system:serviceaccount:kube-system:job-controller"
    assert policies["pods"].run(pod(pod_spec(GPU)), user=job_controller)[0] == [True, True, True]


def test_policies_select_team_namespaces_and_their_kind() -> None:
    objects = admission.queue_admission_objects(_cfg())
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
