"""Rules of ``gpuaas:queues`` added by issue 21: the trusted controllers, Kueue's mapping limit.

Each refusal names its key and is beside the allowed case it differs from by one edit.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import pytest

from components.loader import gpuaas_section, parse_config
from components.model import dra
from components.model.catalog import GPU_MODELS
from components.model.errors import ConfigError
from components.model.queues import DEFAULT_CONTROLLERS
from components.plan.offline import ROOT, stack_config
from components.rules.queues import KUEUE_MAX_DEVICE_CLASS_MAPPINGS
from tests.conftest import raw_stack

DRA_STACK: Final = ROOT / "tests" / "stacks" / "onprem-dra.yaml"


def issues(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    return [str(i) for i in err.value.issues]


def with_controllers(*controllers: dict[str, Any]) -> dict[str, Any]:
    raw = raw_stack("onprem")
    raw["queues"]["controllers"] = list(controllers)
    return raw


# --------------------------------------------------------------------------------------------
# queues.controllers (item 4)


def test_the_default_controllers_are_the_upstream_service_accounts() -> None:
    cfg = parse_config(raw_stack("onprem"))
    assert [(c.username, c.integrations) for c in cfg.queues.controllers] == [
        ("system:serviceaccount:jobset-system:jobset-controller-manager", ["jobset.x-k8s.io/jobset"]),
        ("system:serviceaccount:kubeflow:training-operator", ["kubeflow.org/pytorchjob"]),
        ("system:serviceaccount:mpi-operator:mpi-operator", ["kubeflow.org/mpijob"]),
    ]
    assert list(cfg.queues.controllers) == list(DEFAULT_CONTROLLERS)


def test_an_operator_without_a_kueue_integration_is_allowed() -> None:
    cfg = parse_config(with_controllers({"serviceAccount": "argo/argo-workflow-controller"}))
    assert [c.username for c in cfg.queues.controllers] == ["system:serviceaccount:argo:argo-workflow-controller"]
    assert parse_config(with_controllers()).queues.controllers == []


@pytest.mark.parametrize(
    ("controller", "path", "reason"),
    [
        (
            {"serviceAccount": "vision/my-operator"},
            "gpuaas:queues.controllers[0].serviceAccount",
            "'vision/my-operator' is in team 'vision''s namespace: a team's own identity may not act as a workload "
            "controller",
        ),
        (
            {"serviceAccount": "kubeflow/training-operator", "integrations": ["batch/job"]},
            "gpuaas:queues.controllers[0].integrations[0]",
            "batch/job: the children of batch/job workloads are created by Kubernetes' own controllers",
        ),
        (
            {"serviceAccount": "kubeflow/training-operator", "integrations": ["kubeflow.org/pytorchjob", "pod"]},
            "gpuaas:queues.controllers[0].integrations[1]",
            "pod: the children of pod workloads",
        ),
        ({"serviceAccount": "kubeflow"}, "gpuaas:queues.controllers[0].serviceAccount", "is not <namespace>/<name>"),
        ({"serviceAccount": "Kube/x"}, "gpuaas:queues.controllers[0].serviceAccount", "is not a DNS-1123 label"),
        (
            {"serviceAccount": "a/b", "integrations": ["kubeflow.org/tfjob"]},
            "gpuaas:queues.controllers[0].integrations[0]",
            "",
        ),
    ],
)
def test_bad_controllers_are_refused(controller: dict[str, Any], path: str, reason: str) -> None:
    found = [i for i in issues(with_controllers(controller)) if i.startswith(path + ":")]
    assert found and reason in found[0], found


def test_a_controller_is_listed_once() -> None:
    found = issues(with_controllers({"serviceAccount": "a/b"}, {"serviceAccount": "a/b"}))
    assert found == ["gpuaas:queues.controllers[1].serviceAccount: duplicate 'a/b'"]


def test_controllers_are_unchecked_while_elastic_quotas_are_off() -> None:
    raw = with_controllers({"serviceAccount": "vision/my-operator"})
    raw["queues"]["elastic"] = False
    parse_config(raw)


# --------------------------------------------------------------------------------------------
# Kueue's deviceClassMappings limit (item 11)


def _dra_elastic(extra_profiles: int) -> dict[str, Any]:
    """The DRA variant with elastic quotas and ``extra_profiles`` more MIG profiles, one node group each."""
    raw = copy.deepcopy(gpuaas_section(stack_config("onprem", DRA_STACK)))
    raw["queues"] = {"elastic": True}
    taken = {"1g.10gb", "4g.40gb"}  # the variant's own layouts
    extra = [
        (model, p.name)
        for model in ("H100-80GB", "H200-141GB", "A100-40GB")
        for p in GPU_MODELS[model].profiles
        if p.name not in taken
    ]
    for i, (model, profile) in enumerate(extra[:extra_profiles]):
        raw["platform"]["nodeGroups"].append(
            {"name": f"extra-{i}", "gpuModel": model, "mig": {"profiles": {profile: 1}}}
        )
    return raw


def test_sixteen_device_class_mappings_are_accepted() -> None:
    cfg = parse_config(_dra_elastic(13))
    assert len(dra.kueue_device_class_mappings(cfg)) == KUEUE_MAX_DEVICE_CLASS_MAPPINGS == 16


def test_seventeen_are_refused_naming_the_group_that_adds_the_seventeenth() -> None:
    raw = _dra_elastic(14)
    (found,) = issues(raw)
    # groups 0..2 are the variant's; extra-13 is group 16, its profile the 16th one offered
    assert found.startswith("gpuaas:platform.nodeGroups[16].mig.profiles: Kueue would need 17 ")
    assert "Kueue v0.19.2 accepts at most 16 (pkg/config/validation.go)" in found
    # the same fleet without elastic quotas gives Kueue no mappings at all
    raw["queues"]["elastic"] = False
    parse_config(raw)


def test_dynamic_mig_counts_every_profile_the_driver_may_cut() -> None:
    raw = copy.deepcopy(gpuaas_section(stack_config("onprem", DRA_STACK)))
    raw["queues"] = {"elastic": True}
    for group in raw["platform"]["nodeGroups"]:
        group.pop("mig", None)
    raw["platform"]["nodeGroups"][2]["gpuModel"] = "H200-141GB"
    raw["platform"]["nodeGroups"][1]["gpuModel"] = "A100-40GB"
    raw["gpuOperator"]["dra"] = {"cdiEnabled": True, "dynamicMig": True, "partitionableDevicesEnabled": True}
    raw["teams"] = [t for t in raw["teams"] if not t["quota"].get("mig")]
    found = [i for i in issues(raw) if "deviceClassMappings" in i]
    assert len(found) == 1 and found[0].startswith("gpuaas:gpuOperator.dra.dynamicMig: Kueue would need 21 "), found
    raw["platform"]["nodeGroups"][1]["gpuModel"] = "H100-80GB"  # 14 profiles, 15 mappings
    assert len(dra.kueue_device_class_mappings(parse_config(raw))) == 15
