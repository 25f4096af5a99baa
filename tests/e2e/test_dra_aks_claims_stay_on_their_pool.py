"""The AKS stack with the DRA model on a real API server: a team's claiming pods stay on its ND pool.

On AKS a team's InfiniBand partition is its node pool. A pod that gets its GPU through a
ResourceClaim carries no ``nvidia.com/gpu`` request, so the device-plugin pool guard does not see
it; ``gpuaas-team-dra-node-pool`` asks the same of pods with ``resourceClaims``. The AKS stack is
planned with ``resourceModel: dra`` (and the 1.34 it needs) and applied to its own control plane.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Final

import pytest

from components.dra import claims
from components.dra import tenancy as dra_tenancy
from components.model import dra
from components.plan.offline import run_program
from e2e.controlplane import ControlPlane
from e2e.kube import ApiError, Identity
from e2e.plan_apply import apply_plan
from tests.conftest import fixture_config
from tests.e2e.conftest import need_upstream, start_plane
from tests.e2e.test_dra_quota_and_claim_guard_hold import driver_device_classes

NS: Final = "training"
TRAINER: Final = Identity("carol@example.com", ("aad:gpuaas-training",))


@pytest.fixture(scope="module")
def aks_dra(pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    need_upstream()
    config = copy.deepcopy(fixture_config("aks"))
    config["gpuaas:gpuOperator"]["resourceModel"] = "dra"
    # The AKS default (components/model/versions.py) is 1.34 or newer, which DRA needs; its
    # Ubuntu 22.04 pools run containerd 1.7: CDI is acknowledged, as a stack would once it checked.
    config["gpuaas:gpuOperator"]["dra"] = {"cdiEnabled": True}
    cp = start_plane(pytestconfig, "AKS DRA variant plan")
    try:
        for device_class in driver_device_classes():
            cp.kube.apply(device_class, manager="nvidia-gpu-operator")
        apply_plan(cp.kube, run_program("aks", config=config))
        cp.kube.wait_for("pool policy in force", lambda: _pool_policy_answers(cp), timeout=60)
        yield cp
    finally:
        cp.stop()


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claims.template_name(dra.GPU_CLASS)}],
            **spec,
        },
    }


def _pool_policy_answers(cp: ControlPlane) -> bool:
    try:
        cp.kube.create(_pod("probe"), dry_run=True)
    except ApiError as e:
        return f"ValidatingAdmissionPolicy '{dra_tenancy.POOL_POLICY}'" in e.message
    return False


def test_claiming_pod_without_the_pool_is_refused(aks_dra: ControlPlane) -> None:
    with pytest.raises(ApiError) as err:
        aks_dra.kube.create(_pod("no-pool"), as_=TRAINER)
    assert err.value.status == 403
    assert f"ValidatingAdmissionPolicy '{dra_tenancy.POOL_POLICY}'" in err.value.message, err.value.message
    assert "kubernetes.azure.com/agentpool=ndh100a" in err.value.message, err.value.message


def test_claiming_pod_on_another_teams_pool_is_refused(aks_dra: ControlPlane) -> None:
    pod = _pod("other-pool", nodeSelector={"kubernetes.azure.com/agentpool": "ndh100b"})
    with pytest.raises(ApiError) as err:
        aks_dra.kube.create(pod, as_=TRAINER)
    assert f"ValidatingAdmissionPolicy '{dra_tenancy.POOL_POLICY}'" in err.value.message, err.value.message


def test_claiming_pod_on_its_pool_and_its_claim_are_accepted(aks_dra: ControlPlane) -> None:
    kube = aks_dra.kube
    pod = _pod("own-pool", nodeSelector={"kubernetes.azure.com/agentpool": "ndh100a"})
    assert kube.create(pod, as_=TRAINER)["metadata"]["uid"]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one-gpu", "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": dra.GPU_CLASS}}]}},
    }
    assert kube.create(claim, as_=TRAINER)["metadata"]["uid"]
