"""The DRA variant with elastic quotas on a real API server: a team claims what its queue lends it.

Issue 21, item 5. ``tests/stacks/onprem-dra.yaml`` with ``queues.elastic: true``, and team
language's queue forbidden to borrow 1g.10gb MIG devices (``borrowingLimit.mig["1g.10gb"]: 0``):
planned offline and applied to its own control plane with the driver's DeviceClasses. Before the
fix vision's quota admitted 80 ``mig-1g.10gb.gpuaas.io`` devices (it may borrow them: 24 in
h100-mig, 56 in h100-small) while ``gpuaas-team-claims`` refused every MIG class in its namespace.
Now, as members (impersonated, the team's OIDC group):

- vision claims a borrowable MIG device: admitted by the claims policy and the real ResourceQuota,
  up to the fleet's 80 (81 is refused by the quota, naming its key);
- language, whose queue may not borrow that class, is refused by ``gpuaas-team-claims``, while its
  guaranteed whole GPU is admitted.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any, Final

import pytest

from components.dra import tenancy as dra_tenancy
from components.model import dra
from components.plan.offline import ROOT, run_program, stack_config
from components.tenancy import teams
from e2e.controlplane import ControlPlane
from e2e.kube import ApiError, Identity, Kube
from e2e.plan_apply import apply_plan
from tests.e2e.conftest import need_upstream, start_plane, wait_until_refused
from tests.e2e.test_dra_quota_and_claim_guard_hold import driver_device_classes

DRA_STACK: Final = ROOT / "tests" / "stacks" / "onprem-dra.yaml"
VISION: Final = Identity("erin@example.com", ("oidc:team-vision",))
LANGUAGE: Final = Identity("frank@example.com", ("oidc:team-language",))
SMALL: Final = dra.mig_class("1g.10gb")
_names = itertools.count()


def config() -> dict[str, Any]:
    out = copy.deepcopy(stack_config("onprem", DRA_STACK))
    out["gpuaas:queues"] = {"elastic": True}
    language = next(t for t in out["gpuaas:teams"] if t["name"] == "language")
    language["queue"] = {"borrowingLimit": {"mig": {"1g.10gb": 0}}}
    return out


@pytest.fixture(scope="module")
def kube(pytestconfig: pytest.Config) -> Iterator[Kube]:
    need_upstream()
    cp: ControlPlane = start_plane(pytestconfig, "DRA variant with elastic quotas")
    try:
        for device_class in driver_device_classes():
            cp.kube.apply(device_class, manager="nvidia-gpu-operator")
        apply_plan(cp.kube, run_program("onprem", config=config()))
        for ns in ("vision", "language"):
            cp.kube.wait_for(
                f"{ns} quota status",
                lambda ns=ns: (cp.kube.get("v1", "ResourceQuota", teams.QUOTA, ns) or {}).get("status", {}).get("used"),
                90,
            )
        yield cp.kube
    finally:
        cp.stop()


def claim(ns: str, device_class: str, count: int = 1) -> dict[str, Any]:
    request = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{next(_names)}", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": request}]}},
    }


def refused(kube: Kube, obj: dict[str, Any], who: Identity) -> str:
    with pytest.raises(ApiError) as err:
        kube.create(obj, as_=who, dry_run=True)
    assert err.value.status == 403, err.value
    return err.value.message


def test_the_namespaces_name_what_the_queues_lend(kube: Kube) -> None:
    vision = kube.get("v1", "Namespace", "vision") or {}
    language = kube.get("v1", "Namespace", "language") or {}
    assert vision["metadata"]["labels"].get(f"{dra.CLASS_LABEL_PREFIX}{SMALL}") == "true"
    assert f"{dra.CLASS_LABEL_PREFIX}{SMALL}" not in language["metadata"]["labels"]
    hard = (kube.get("v1", "ResourceQuota", teams.QUOTA, "vision") or {})["status"]["hard"]
    assert hard[dra.device_quota_key(SMALL)] == "80"


def test_a_team_claims_a_device_its_queue_may_borrow(kube: Kube) -> None:
    def admitted() -> bool:
        try:
            kube.create(claim("vision", SMALL), as_=VISION, dry_run=True)
        except ApiError:
            return False
        return True

    kube.wait_for("vision's borrowable MIG claim admitted", admitted, 60)
    kube.create(claim("vision", SMALL, 80), as_=VISION, dry_run=True)  # the fleet's 24 + 56
    message = refused(kube, claim("vision", SMALL, 81), VISION)
    assert "exceeded quota: gpuaas-team-quota" in message and dra.device_quota_key(SMALL) in message, message


def test_a_class_the_queue_may_not_borrow_is_refused_by_the_claims_policy(kube: Kube) -> None:
    # The API server loads a stored policy a moment later (on a busy machine, later still): until then
    # the real ResourceQuota refuses the claim (language's limit is 0), naming the quota, not the policy.
    policy = f"ValidatingAdmissionPolicy '{dra_tenancy.CLAIMS_POLICY}'"
    wait_until_refused(kube, claim("language", SMALL), LANGUAGE, policy, timeout=120)
    message = refused(kube, claim("language", SMALL), LANGUAGE)
    assert f"ValidatingAdmissionPolicy '{dra_tenancy.CLAIMS_POLICY}'" in message, message
    assert "a team may claim only the device classes its quota covers" in message
    # the twin: its guaranteed whole GPUs
    kube.create(claim("language", dra.GPU_CLASS), as_=LANGUAGE, dry_run=True)
