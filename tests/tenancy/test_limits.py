"""The team LimitRange and ResourceQuota against the API server's admission order (issue 11, item 12).

A pod passes, in this order (kube-apiserver, ``pkg/kubeapiserver/options/plugins.go``):

1. API defaulting at decode: a container with a limit and no request gets request = limit
   (``pkg/apis/core/v1/defaults.go``, ``SetDefaults_Pod``);
2. LimitRanger (mutating): each ``default`` is set as the limit and each ``defaultRequest`` as the
   request of a container that lacks it (``plugin/pkg/admission/limitranger/admission.go``,
   ``mergeContainerResources``);
3. validation: a request above its limit is refused, "must be less than or equal to <r> limit"
   (``pkg/apis/core/validation``, ``ValidateResourceRequirements``);
4. ResourceQuota: a quota that names a compute resource makes every container state it, "must
   specify <r>" (``pkg/quota/v1/evaluator/core/pods.go``, ``enforcePodContainerConstraints``).

:func:`admit` is that sequence for the fields a team LimitRange and quota use. It is a model, and
the tests pin it on the old defaults (which refused GPU pods) before they use it on the new ones.
"""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any, Final

import pytest

from tests import tenancy_objects
from tests.conftest import raw_stack

_SUFFIX: Final = {"": 1, "m": Decimal("0.001"), "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3}
_SUFFIX.update({"M": 10**6, "G": 10**9})
#: The compute resources a ResourceQuota can require of every container.
COMPUTE: Final = ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory", "cpu", "memory")


def quantity(text: str) -> Decimal:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", text)
    assert m is not None and m.group(2) in _SUFFIX, f"quantity {text!r} outside this model"
    return Decimal(m.group(1)) * _SUFFIX[m.group(2)]


def admit(pod_spec: dict[str, Any], limit_range: list[dict[str, Any]], hard: dict[str, str]) -> list[str]:
    """The refusals a pod with ``pod_spec`` gets in a namespace with these objects (empty: admitted)."""
    spec = copy.deepcopy(pod_spec)
    errors: list[str] = []
    container_items = [item for item in limit_range if item["type"] == "Container"]
    for c in spec["containers"]:
        res = c.setdefault("resources", {})
        requests, limits = res.setdefault("requests", {}), res.setdefault("limits", {})
        for r, v in limits.items():  # 1. defaulting
            requests.setdefault(r, v)
        for item in container_items:  # 2. LimitRanger
            for r, v in item.get("default", {}).items():
                limits.setdefault(r, v)
            for r, v in item.get("defaultRequest", {}).items():
                requests.setdefault(r, v)
        for r, v in requests.items():  # 3. validation
            if r in limits and quantity(v) > quantity(limits[r]):
                errors.append(f"{c['name']}: {r} request {v} must be less than or equal to {r} limit {limits[r]}")
        for key in COMPUTE:  # 4. quota
            if key not in hard:
                continue
            kind, _, r = key.rpartition(".")
            stated = (limits if kind == "limits" else requests).get(r)
            if stated is None:
                errors.append(f"{c['name']}: must specify {key}")
    return errors


def _gpu_pod(memory: str = "64Gi", memory_limit: str | None = None) -> dict[str, Any]:
    """A training pod as users write them: GPUs as limits, cpu and memory as requests only."""
    limits = {"nvidia.com/gpu": "8"}
    if memory_limit is not None:
        limits["memory"] = memory_limit
    return {
        "containers": [{"name": "train", "resources": {"requests": {"cpu": "16", "memory": memory}, "limits": limits}}]
    }


#: What gpuaas rendered until 2026-12: a 2Gi default memory limit, and limits.memory in the quota.
OLD_LIMIT_RANGE: Final = [
    {"type": "Container", "defaultRequest": {"cpu": "1", "memory": "2Gi"}, "default": {"memory": "2Gi"}}
]
OLD_HARD: Final = {"requests.cpu": "64", "requests.memory": "512Gi", "limits.memory": "512Gi", "pods": "200"}


def _team_objects() -> tuple[list[dict[str, Any]], dict[str, str]]:
    from components.loader import parse_config

    cfg = parse_config(raw_stack("aks"))
    team = cfg.teams[0]
    objects = tenancy_objects.team_objects(cfg, team)
    return objects["limits"]["spec"]["limits"], objects["quota"]["spec"]["hard"]


def test_the_model_reproduces_the_old_refusal() -> None:
    """The bug of item 12, shown by the model: requests-only GPU pods above 2Gi were refused."""
    assert admit(_gpu_pod(), OLD_LIMIT_RANGE, OLD_HARD) == [
        "train: memory request 64Gi must be less than or equal to memory limit 2Gi"
    ]
    assert admit(_gpu_pod("1Gi"), OLD_LIMIT_RANGE, OLD_HARD) == [], "below the default limit it passed"


def test_gpu_pods_are_admitted_with_requests_only() -> None:
    limit_range, hard = _team_objects()
    assert admit(_gpu_pod(), limit_range, hard) == []
    assert admit(_gpu_pod("1Ti"), limit_range, hard) == [], "as much memory as the request says"


@pytest.mark.parametrize("memory", ["64Gi", "1Gi"])
def test_a_request_above_its_own_limit_is_still_refused(memory: str) -> None:
    """The allowed twin's refusal: the API's own rule stands, gpuaas only stopped inventing limits."""
    limit_range, hard = _team_objects()
    assert admit(_gpu_pod("128Gi", memory_limit=memory), limit_range, hard) == [
        f"train: memory request 128Gi must be less than or equal to memory limit {memory}"
    ]
    assert admit(_gpu_pod("32Gi", memory_limit="64Gi"), limit_range, hard) == []


def test_a_pod_that_states_nothing_gets_the_default_requests() -> None:
    limit_range, hard = _team_objects()
    assert admit({"containers": [{"name": "sh"}]}, limit_range, hard) == []
    assert admit({"containers": [{"name": "sh"}]}, [], hard) == [
        "sh: must specify requests.cpu",
        "sh: must specify requests.memory",
    ], "without the LimitRange the quota would refuse it"


def test_quota_requires_no_limit_of_anyone() -> None:
    _limit_range, hard = _team_objects()
    assert not any(k.startswith("limits.") for k in hard)
    assert admit(_gpu_pod(), [], {**hard, "limits.memory": "1Ti"}) == ["train: must specify limits.memory"]
