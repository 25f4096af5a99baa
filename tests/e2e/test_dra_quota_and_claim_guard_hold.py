"""The DRA variant stack on a real API server (v1.34, ``resource.k8s.io/v1``): quota and claim guard.

``tests/stacks/onprem-dra.yaml`` is planned offline and applied in install order to its own
control plane. No DRA driver runs here, so the driver's DeviceClasses are created first exactly
as the GPUCluster controller writes them (:data:`components.model.dra.DRIVER_CLASSES`). Then, as a
member of team ``research`` (impersonated: user + the team's OIDC group, what a login carries),
each promise is its own test, with the server's own words in the assertion:

- a ResourceClaim beyond the team's device quota is refused by the real ResourceQuota admission;
- a claim of a device class the team may not use is refused by ``gpuaas-team-claims``;
- the team's own claims and templates are accepted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, Final

import pytest

from components.dra import tenancy as dra_tenancy
from components.model import dra
from components.operators import gpu_cluster
from components.plan.offline import ROOT, Run, run_program, stack_config
from components.tenancy import teams
from e2e.controlplane import DRA_BETA, ControlPlane
from e2e.kube import ApiError, Identity, Kube
from e2e.plan_apply import apply_plan
from tests.e2e.conftest import need_upstream, start_plane

DRA_STACK: Final = ROOT / "tests" / "stacks" / "onprem-dra.yaml"
NS: Final = "research"
RESEARCHER: Final = Identity("alice@example.com", ("oidc:team-research",))
VISION_MEMBER: Final = Identity("bob@example.com", ("oidc:team-vision",))
_names = itertools.count()


class DraCluster:
    def __init__(self, cp: ControlPlane, run: Run) -> None:
        self.cp, self.run = cp, run

    @property
    def kube(self) -> Kube:
        return self.cp.kube


def driver_device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the GPUCluster controller creates (gpu-operator v26.7.0 manifests/state-dra-driver)."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]},
        }
        for name, expr in dra.DRIVER_CLASSES.items()
    ]


@pytest.fixture(scope="module")
def dra_cluster(pytestconfig: pytest.Config) -> Iterator[DraCluster]:
    need_upstream()
    cp = start_plane(pytestconfig, "DRA variant plan")
    try:
        run = run_program("onprem", config=stack_config("onprem", DRA_STACK))
        for device_class in driver_device_classes():
            cp.kube.apply(device_class, manager="nvidia-gpu-operator")
        apply_plan(cp.kube, run)
        # Quota admission enforces only once the controller has written status.hard/used.
        cp.kube.wait_for(
            "research quota status",
            lambda: (cp.kube.get("v1", "ResourceQuota", teams.QUOTA, NS) or {}).get("status", {}).get("used"),
            timeout=90,
        )
        # A new policy takes effect once the API server has loaded it: until then a forbidden class
        # would reach the quota (which refuses it too, for another reason). Wait for the policy's word.
        cp.kube.wait_for("gpuaas-team-claims in force", lambda: _policy_answers(cp.kube), timeout=60)
        yield DraCluster(cp, run)
    finally:
        cp.stop()


def _policy_answers(kube: Kube) -> bool:
    try:
        kube.create(claim(dra.VFIO_CLASS), dry_run=True)
    except ApiError as e:
        return f"ValidatingAdmissionPolicy '{dra_tenancy.CLAIMS_POLICY}'" in e.message
    raise AssertionError("a vfio claim in a team namespace was admitted")


def claim(device_class: str, count: int = 1, **exactly: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{next(_names)}", "namespace": NS},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "req",
                        "exactly": {
                            "deviceClassName": device_class,
                            "allocationMode": "ExactCount",
                            "count": count,
                            **exactly,
                        },
                    }
                ]
            }
        },
    }


def refusal(kube: Kube, obj: dict[str, Any], who: Identity = RESEARCHER) -> ApiError:
    with pytest.raises(ApiError) as err:
        kube.create(obj, as_=who)
    return err.value


def test_the_plan_is_accepted_with_its_dra_objects(dra_cluster: DraCluster) -> None:
    kube = dra_cluster.kube
    assert kube.get("nvidia.com/v1alpha1", "GPUCluster", gpu_cluster.GPU_CLUSTER) is not None
    for profile in ("1g.10gb", "4g.40gb"):
        assert kube.get("resource.k8s.io/v1", "DeviceClass", dra.mig_class(profile)) is not None
    names = {t["metadata"]["name"] for t in kube.list("resource.k8s.io/v1", "ResourceClaimTemplate", NS)}
    assert names == {"gpuaas-mig-1g.10gb", "gpuaas-mig-4g.40gb"}
    hard = kube.get("v1", "ResourceQuota", teams.QUOTA, NS)["status"]["hard"]  # type: ignore[index]
    assert hard["mig-4g.40gb.gpuaas.io.deviceclass.resource.k8s.io/devices"] == "4"
    assert hard["count/resourceclaims.resource.k8s.io"] == "16"


def test_team_member_claims_its_own_devices(dra_cluster: DraCluster) -> None:
    kube = dra_cluster.kube
    got = kube.create(claim(dra.mig_class("1g.10gb"), count=2), as_=RESEARCHER)
    assert got["metadata"]["uid"]
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "my-two-small", "namespace": NS},
        "spec": {"spec": claim(dra.mig_class("1g.10gb"), count=2)["spec"]},
    }
    assert kube.create(template, as_=RESEARCHER)["metadata"]["uid"]


@pytest.mark.every_minor  # quota: also on the oldest supported minor
def test_claim_beyond_the_device_quota_is_refused_by_quota_admission(dra_cluster: DraCluster) -> None:
    kube = dra_cluster.kube
    key = dra.device_quota_key(dra.mig_class("4g.40gb"))
    err = refusal(kube, claim(dra.mig_class("4g.40gb"), count=5))
    assert err.status == 403, err
    assert "exceeded quota: gpuaas-team-quota" in err.message and key in err.message, err.message
    # Its allowed twin: the whole quota in one claim fits, and then not one device more.
    kube.create(claim(dra.mig_class("4g.40gb"), count=4), as_=RESEARCHER)
    err = refusal(kube, claim(dra.mig_class("4g.40gb"), count=1))
    assert "exceeded quota: gpuaas-team-quota" in err.message and f"limited: {key}=4" in err.message, err.message


@pytest.mark.parametrize("device_class", [dra.GPU_CLASS, dra.MIG_CLASS, dra.VFIO_CLASS, "mig-7g.80gb.gpuaas.io"])
def test_claim_of_a_class_the_team_may_not_use_is_refused_by_the_policy(
    dra_cluster: DraCluster, device_class: str
) -> None:
    err = refusal(dra_cluster.kube, claim(device_class))
    assert err.status == 403, err
    assert f"ValidatingAdmissionPolicy '{dra_tenancy.CLAIMS_POLICY}'" in err.message, err.message
    assert "a team may claim only the device classes its quota covers" in err.message, err.message


def test_template_of_a_forbidden_class_is_refused_too(dra_cluster: DraCluster) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "sneaky-gpu", "namespace": NS},
        "spec": {"spec": claim(dra.GPU_CLASS)["spec"]},
    }
    err = refusal(dra_cluster.kube, template)
    assert f"ValidatingAdmissionPolicy '{dra_tenancy.CLAIMS_POLICY}'" in err.message, err.message


def test_allocation_mode_all_is_refused(dra_cluster: DraCluster) -> None:
    obj = claim(dra.mig_class("1g.10gb"))
    del obj["spec"]["devices"]["requests"][0]["exactly"]["count"]
    obj["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All"
    err = refusal(dra_cluster.kube, obj)
    assert "allocationMode All is not allowed in team namespaces" in err.message, err.message
    assert f"ValidatingAdmissionPolicy '{dra_tenancy.CLAIMS_POLICY}'" in err.message, err.message


def test_another_team_cannot_claim_in_this_namespace(dra_cluster: DraCluster) -> None:
    err = refusal(dra_cluster.kube, claim(dra.mig_class("1g.10gb")), who=VISION_MEMBER)
    assert err.status == 403 and 'cannot create resource "resourceclaims"' in err.message, err.message


@pytest.mark.every_minor  # v1beta2 is served on the oldest minor too
def test_a_claim_sent_at_an_older_version_meets_the_same_policy(dra_cluster: DraCluster) -> None:
    """``matchPolicy: Equivalent`` (issue #21, item 20): the policy's rule names ``resource.k8s.io/v1``,
    and a claim sent as ``v1beta2`` is converted to v1 and checked too. With ``Exact`` it would pass
    unchecked. The allowed twin at the same version beside it. The e2e API server serves v1beta2
    (e2e/controlplane.py ``DRA_BETA``: off by default upstream, on where a cluster enables it)."""
    kube = dra_cluster.kube
    assert kube.served(DRA_BETA, "ResourceClaim"), f"the e2e API server must serve {DRA_BETA} (--runtime-config)"
    forbidden = {**claim(dra.VFIO_CLASS), "apiVersion": DRA_BETA}  # v1beta2 has v1's shape
    err = refusal(kube, forbidden)
    assert err.status == 403, err
    assert f"ValidatingAdmissionPolicy '{dra_tenancy.CLAIMS_POLICY}'" in err.message, err.message
    allowed = {**claim(dra.mig_class("1g.10gb")), "apiVersion": DRA_BETA}
    kube.create(allowed, as_=RESEARCHER, dry_run=True)
