"""The AKS variant with elastic quotas on a real API server: flavors and pool guard agree.

``tests/stacks/aks-elastic.yaml`` (three ND pools: ndh100a is training's partition, ndh100b
finetune's, ndshared nobody's; team interns has no partition) is planned offline and applied in
install order to its own control plane (issue 21, items 6 and 12). As team members:

- Kueue writes an admitted Job's flavor ``nodeLabels`` into its pod template as a nodeSelector:
  with the labels the stored ResourceFlavors carry, the Job's pods pass
  ``gpuaas-team-node-pool``; with the node-group label alone (the flavors before this fix) they
  were refused, and the Job never got a pod;
- a partitionless team's GPU pod on another team's pool is refused, on the pool no team owns it
  is admitted.

Which node a pod lands on is the simulated-fleet issue's proof (a scheduler); this is admission.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest

from components.model.resources import GPU
from components.plan.offline import ROOT, run_program, stack_config
from components.queueing import queues
from components.queueing.admission import QUEUE_LABEL
from components.tenancy.admission import POOL_POLICY
from e2e.controlplane import ControlPlane
from e2e.kube import ApiError, Identity, Kube
from e2e.plan_apply import apply_plan
from tests.e2e.conftest import need_upstream, start_plane, wait_until_refused

STACK: Final = ROOT / "tests" / "stacks" / "aks-elastic.yaml"
TRAINER: Final = Identity("carol@example.com", ("aad:gpuaas-training",))
INTERN: Final = Identity("dave@example.com", ("aad:gpuaas-interns",))
POOL_KEY: Final = "kubernetes.azure.com/agentpool"


@pytest.fixture(scope="module")
def kube(pytestconfig: pytest.Config) -> Iterator[Kube]:
    need_upstream()
    cp: ControlPlane = start_plane(pytestconfig, "AKS elastic variant plan")
    try:
        apply_plan(cp.kube, run_program("aks", config=stack_config("aks", STACK)))
        for ns in ("training", "interns"):
            cp.kube.wait_for(
                f"quota status in {ns}",
                lambda ns=ns: (
                    (cp.kube.get("v1", "ResourceQuota", "gpuaas-team-quota", ns) or {}).get("status", {}).get("hard")
                ),
                60,
            )
        yield cp.kube
    finally:
        cp.stop()


def gpu_pod(
    ns: str, node_selector: dict[str, str] | None = None, tolerations: list[Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {GPU: "1"}},
            }
        ]
    }
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns, "labels": {QUEUE_LABEL: ns}},
        "spec": spec,
    }


def refusal(kube: Kube, obj: dict[str, Any], who: Identity) -> str:
    with pytest.raises(ApiError) as err:
        kube.create(obj, as_=who, dry_run=True)
    assert err.value.status == 403, err.value
    return err.value.message


def test_the_stored_flavors_carry_the_pool_label(kube: Kube) -> None:
    for pool in ("ndh100a", "ndh100b", "ndshared"):
        flavor = kube.get(queues.API, "ResourceFlavor", pool) or {}
        assert flavor["spec"]["nodeLabels"] == {"gpuaas.io/node-group": pool, POOL_KEY: pool}, flavor


def test_an_admitted_jobs_pods_pass_the_pool_guard_with_what_kueue_injects(kube: Kube) -> None:
    flavor = kube.get(queues.API, "ResourceFlavor", "ndh100a") or {}
    injected = gpu_pod("training", dict(flavor["spec"]["nodeLabels"]), flavor["spec"].get("tolerations"))
    wait_until_refused(kube, gpu_pod("training"), TRAINER, POOL_KEY)
    kube.create(injected, as_=TRAINER, dry_run=True)
    # the flavors before this fix: the node-group label only
    before = gpu_pod("training", {"gpuaas.io/node-group": "ndh100a"}, flavor["spec"].get("tolerations"))
    message = refusal(kube, before, TRAINER)
    assert f"ValidatingAdmissionPolicy '{POOL_POLICY}'" in message and f"nodeSelector {POOL_KEY}=ndh100a" in message


def test_a_team_without_a_partition_stays_off_the_other_teams_pools(kube: Kube) -> None:
    shared = kube.get(queues.API, "ResourceFlavor", "ndshared") or {}
    wait_until_refused(kube, gpu_pod("interns", {POOL_KEY: "ndh100a"}), INTERN, "select a pool no team owns")
    for pool in ("ndh100a", "ndh100b"):
        message = refusal(kube, gpu_pod("interns", {POOL_KEY: pool}), INTERN)
        assert f"ValidatingAdmissionPolicy '{POOL_POLICY}'" in message, message
        assert f"select a pool no team owns with nodeSelector {POOL_KEY} (ndshared)" in message, message
    refusal(kube, gpu_pod("interns"), INTERN)  # unpinned: it could land on any pool
    # the allowed twins: the pool nobody owns, as the interns' flavor injects it, or written by hand
    kube.create(
        gpu_pod("interns", dict(shared["spec"]["nodeLabels"]), shared["spec"].get("tolerations")),
        as_=INTERN,
        dry_run=True,
    )
    kube.create(gpu_pod("interns", {POOL_KEY: "ndshared"}), as_=INTERN, dry_run=True)
