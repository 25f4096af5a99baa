"""``gpuaas-team-hami``'s rendered CEL, evaluated with cel-python: each refusal beside its allowed twin.

The same table (tests/hami_cases.py) runs against the real API server in
tests/e2e/test_hami_pods_are_admitted_only_as_hami_books_them.py; here every case also names the one
check that refuses it, and pods without HAMi resources pass whatever they carry.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.loader import parse_config
from components.model import hami, resources
from components.tenancy import hami_admission
from tests import tenancy_objects
from tests.hami_cases import CASES, TEAM, Edit, hami_cfg, hami_pod, hami_raw
from tests.tenancy.test_admission_cel import Policy

CFG = hami_cfg()
MANIFEST = tenancy_objects.admission_objects(CFG)["hami-policy"]
POLICY = Policy(MANIFEST)
CHECKS = [name for name, _expr, _msg in hami_admission.checks("default")]


def failing(pod: dict[str, Any]) -> list[str]:
    """The checks of gpuaas-team-hami that ``pod`` fails."""
    return [name for name, ok in zip(CHECKS, POLICY.results(pod, TEAM), strict=True) if not ok]


def test_validations_line_up_with_the_checks() -> None:
    validations = MANIFEST["spec"]["validations"]
    assert [v["message"] for v in validations] == [msg for _n, _e, msg in hami_admission.checks("default")]
    assert all(v["expression"].startswith("!variables.hami || ") for v in validations)
    assert MANIFEST["spec"]["failurePolicy"] == "Fail"
    binding = tenancy_objects.admission_objects(CFG)["hami-binding"]
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_the_allowed_pod_passes_every_check() -> None:
    assert failing(hami_pod()) == []


@pytest.mark.parametrize(("check", "refuse", "allow"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_forbidden_field_fails_its_check_and_its_twin_passes(check: str, refuse: Edit, allow: Edit) -> None:
    refused, allowed = hami_pod(), hami_pod()
    refuse(refused)
    allow(allowed)
    assert failing(refused) == [check]
    assert failing(allowed) == []


@pytest.mark.parametrize(("check", "refuse"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_a_pod_without_hami_resources_is_not_this_policys_business(check: str, refuse: Edit) -> None:
    del check
    pod = hami_pod()
    refuse(pod)
    for c in pod["spec"]["containers"]:
        c["resources"] = {"limits": {resources.GPU: "1"}} if c["name"] == "main" else {}
    assert failing(pod) == []


def test_any_hami_resource_in_any_container_list_makes_a_hami_pod() -> None:
    for name in resources.HAMI_RESOURCES:
        for field in ("containers", "initContainers"):
            pod = hami_pod()
            del pod["spec"]["schedulerName"]
            pod["spec"]["containers"][0]["resources"]["limits"] = {}
            pod["spec"][field] = pod["spec"].get(field) or [{"name": "c", "image": "x"}]
            pod["spec"][field][0]["resources"] = {"requests": {name: "1"}, "limits": {name: "1"}}
            assert "scheduler" in failing(pod), (name, field)


@pytest.mark.parametrize("core_policy", ["default", "force", "disable"])
def test_the_core_policy_the_webhook_adds_is_the_only_one_allowed(core_policy: str) -> None:
    """HAMi's webhook appends GPU_CORE_UTILIZATION_POLICY with the cluster's policy (not for default)."""
    raw = hami_raw()
    raw["platform"]["nodeGroups"][1]["hami"]["corePolicy"] = core_policy
    policy = Policy(tenancy_objects.admission_objects(parse_config(raw))["hami-policy"])
    for value in ("default", "force", "disable"):
        pod = hami_pod()
        pod["spec"]["containers"][0]["env"] = [{"name": hami.CORE_POLICY_ENV, "value": value}]
        ok = dict(zip(CHECKS, policy.results(pod, TEAM), strict=True))["environment"]
        assert ok == (value == core_policy), (core_policy, value)
