"""The queue admission policies' real CEL text, evaluated with cel-python as the API server would.

Same harness as tests/test_admission_cel.py (cel-go's library functions, RE2 ``matches``), with
``namespaceObject`` and the request's kind and operation in the activation: the policies read
the namespace's ``gpuaas.io/team`` label for the team's own queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

from components import queue_admission
from components.config import StackConfig
from components.loader import parse_config
from components.teams import TEAM_LABEL
from tests.conftest import raw_stack
from tests.test_admission_cel import Policy

NS: Final = "vision"
QUEUE: Final = queue_admission.QUEUE_LABEL


class QueuePolicy(Policy):
    """A queue policy: ``request`` of its own kind, ``namespaceObject`` of a team namespace."""

    def __init__(self, manifest: Mapping[str, Any], kind: str, group: str) -> None:
        super().__init__(manifest)
        self.kind, self.group = kind, group

    def run(self, obj: Mapping[str, Any], operation: str = "CREATE", team: str = NS) -> tuple[list[bool], list[str]]:
        act: dict[str, Any] = {
            "object": json_to_cel(dict(obj)),
            "oldObject": None,
            "params": None,
            "request": json_to_cel(
                {"namespace": team, "operation": operation, "kind": {"group": self.group, "kind": self.kind}}
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
        messages = [str(m.evaluate(act)) for m, ok in zip(self.messages, results, strict=True) if m and not ok]
        return results, messages


def _cfg(**queues: Any) -> StackConfig:
    raw = raw_stack("onprem")
    raw["queues"].update(queues)
    return parse_config(raw)


def _policies(cfg: StackConfig) -> dict[str, QueuePolicy]:
    objects = queue_admission.queue_admission_objects(cfg)
    out = {}
    for _integration, group, _version, plural, _specs in queue_admission.KINDS:
        role = f"{plural}-queue-policy"
        if role in objects:
            kind = {"pods": "Pod", "jobs": "Job", "jobsets": "JobSet", "pytorchjobs": "PyTorchJob", "mpijobs": "MPIJob"}
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
        ("GPU Job naming its own queue", job(pod_spec(GPU), "vision"), [True, True]),
        ("GPU Job naming another team's queue", job(pod_spec(GPU), "speech"), [False, False]),
        ("GPU Job naming no queue", job(pod_spec(GPU)), [True, False]),
        ("MIG Job naming no queue", job(pod_spec(CPU, MIG)), [True, False]),
        ("time-sliced GPU in an init container, no queue", job(pod_spec(CPU, init=[SHARED])), [True, False]),
        (
            "GPU as a limit only, no queue",
            job(pod_spec({"name": "m", "resources": {"limits": {"nvidia.com/gpu": "1"}}})),
            [True, False],
        ),
        ("CPU Job naming no queue", job(pod_spec(CPU)), [True, True]),
        ("RDMA-only Job (a VF is not a GPU) naming no queue", job(pod_spec(VF)), [True, True]),
        ("CPU Job naming another team's queue", job(pod_spec(CPU), "speech"), [False, True]),
        ("a prefix of its own queue", job(pod_spec(GPU), "vision-x"), [False, False]),
    ],
)
def test_job_policy(case: str, obj: dict[str, Any], ok: list[bool]) -> None:
    results, messages = DEFAULT["jobs"].run(obj)
    assert results == ok, case
    if not ok[0]:
        assert any("may name only LocalQueue vision" in m for m in messages)
    if not ok[1]:
        assert any(f"add the label {QUEUE}: vision" in m for m in messages)


def test_relabel_to_another_queue_is_refused_on_update_but_an_old_unlabelled_job_may_be_updated() -> None:
    assert DEFAULT["jobs"].run(job(pod_spec(GPU), "speech"), operation="UPDATE")[0] == [False, True]
    assert DEFAULT["jobs"].run(job(pod_spec(GPU)), operation="UPDATE")[0] == [True, True]


def test_each_team_names_only_its_own_queue() -> None:
    obj = job(pod_spec(GPU), "speech")
    obj["metadata"]["namespace"] = "speech"
    assert DEFAULT["jobs"].run(obj, team="speech")[0] == [True, True]
    assert DEFAULT["jobs"].run(obj, team="vision")[0] == [False, False]


@pytest.mark.parametrize(
    ("case", "obj", "ok"),
    [
        ("plain GPU pod with its queue", pod(pod_spec(GPU), "vision"), [True, True]),
        ("plain GPU pod without a queue", pod(pod_spec(GPU)), [True, False]),
        (
            "a Job's pod (controller owner) without a queue",
            pod(
                pod_spec(GPU),
                ownerReferences=[
                    {"kind": "Job", "name": "w", "uid": "1", "controller": True, "apiVersion": "batch/v1"}
                ],
            ),
            [True, True],
        ),
        (
            "a non-controller owner does not exempt",
            pod(pod_spec(GPU), ownerReferences=[{"kind": "ConfigMap", "name": "w", "uid": "1", "apiVersion": "v1"}]),
            [True, False],
        ),
        ("plain CPU pod", pod(pod_spec(CPU)), [True, True]),
        ("a pod naming another team's queue", pod(pod_spec(CPU), "speech"), [False, True]),
    ],
)
def test_pod_policy(case: str, obj: dict[str, Any], ok: list[bool]) -> None:
    assert DEFAULT["pods"].run(obj)[0] == ok, case


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
        (pod_spec(GPU), None, [True, False]),
        (pod_spec(GPU), "vision", [True, True]),
        (pod_spec(GPU), "speech", [False, False]),
        (pod_spec(CPU), None, [True, True]),
    ):
        obj = {"metadata": meta(queue), "spec": spec_of(spec)}
        assert policy.run(obj)[0] == ok, (plural, queue)
    assert policy.run({"metadata": meta(), "spec": {}})[0] == [True, True]


def test_manage_jobs_without_queue_name_drops_the_label_requirement_only() -> None:
    policies = _policies(_cfg(manageJobsWithoutQueueName=True))
    assert len(policies["jobs"].validations) == 1
    assert policies["jobs"].run(job(pod_spec(GPU)))[0] == [True]
    assert policies["jobs"].run(job(pod_spec(GPU), "speech"))[0] == [False]


def test_pods_outside_the_integrations_cannot_be_queued() -> None:
    policies = _policies(_cfg(integrations=["batch/job"]))
    assert set(policies) == {"pods", "jobs"}
    results, messages = policies["pods"].run(pod(pod_spec(GPU), "vision"))
    assert results == [True, False]
    assert "lacks pod" in messages[0]
    assert policies["pods"].run(pod(pod_spec(CPU)))[0] == [True, True]
    owned = pod(
        pod_spec(GPU),
        ownerReferences=[{"kind": "Job", "name": "w", "uid": "1", "controller": True, "apiVersion": "batch/v1"}],
    )
    assert policies["pods"].run(owned)[0] == [True, True]


def test_policies_select_team_namespaces_and_their_kind() -> None:
    objects = queue_admission.queue_admission_objects(_cfg())
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
