"""Kueue gives back the quota of an admitted workload whose pods never start (issue 21, item 6).

The decision (components/queueing/queues.py ``kueue_configuration``): the VF budget of quota and
queue is one (every VF consumer goes through the queue, components/queueing/admission.py), and
for cpu and memory, which pods outside the queue share with it, ``waitForPodsReady``: Kueue evicts
and requeues a workload whose pods are not all ready within ``queues.podsReadyTimeoutSeconds``, so
a Job whose pods the ResourceQuota refuses holds no quota — borrowed GPUs included — for longer.

Here, on the onprem plan with the timeout set to 20 s (rendered by the plan into Kueue's own
Configuration) and Kueue's own manager: a CPU-only pod outside the queue takes most of vision's
CPU ceiling; Kueue, which does not read ResourceQuota, admits a GPU Job of vision; the Job
controller's pod is refused by the real ResourceQuota admission (its event says so); Kueue holds
the quota until the timeout, then evicts the workload (``PodsReadyTimeout``), suspends the Job
and the ClusterQueue's usage drops back to nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from components import platform_args
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import GPU
from components.plan.offline import run_program
from components.queueing import queues
from e2e.controlplane import ControlPlane
from tests.conftest import qualified, raw_stack
from tests.e2e.kueue_manager import KUEUE_API, Kueue, gpu_usage, job, kueue_plane, member, workload_of

TIMEOUT: Final = 20
A: Final = "vision"


def _raw() -> dict[str, Any]:
    raw = raw_stack("onprem")
    raw["queues"]["podsReadyTimeoutSeconds"] = TIMEOUT
    return raw


CFG: Final[StackConfig] = parse_config(_raw())
WHO: Final = member(next(t for t in CFG.teams if t.name == A))


@pytest.fixture(scope="module")
def kueue(pytestconfig: pytest.Config) -> Iterator[tuple[ControlPlane, Kueue]]:
    run = run_program("onprem", config=qualified(_raw()))
    # pods_ready_timeout None: Kueue runs with the plan's own waitForPodsReady
    yield from kueue_plane(pytestconfig, "onprem plan with Kueue (20 s to start)", run, CFG, pods_ready_timeout=None)


def _since(obj: dict[str, Any] | None, kind: str, reason: str | None = None) -> float | None:
    for c in (obj or {}).get("status", {}).get("conditions") or []:
        if c["type"] == kind and c["status"] == "True" and (reason is None or c.get("reason") == reason):
            return time.mktime(time.strptime(c["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ"))
    return None


def test_the_plan_gives_kueue_the_stacks_timeout(kueue: tuple[ControlPlane, Kueue]) -> None:
    assert kueue[1].configuration()["waitForPodsReady"] == {"timeout": f"{TIMEOUT}s", "blockAdmission": False}
    assert queues.kueue_configuration(platform_args.queues(CFG))["waitForPodsReady"]["timeout"] == f"{TIMEOUT}s"


def test_a_job_whose_pods_the_quota_refuses_gives_its_quota_back(kueue: tuple[ControlPlane, Kueue]) -> None:
    kube = kueue[0].kube
    # vision's cpu ceiling is 192 guaranteed + 128 borrowable = 320; a notebook outside the queue
    # (CPU only: no queue label needed) takes 300 of it.
    hog = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook", "namespace": A},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "300", "memory": "1Gi"}},
                }
            ]
        },
    }
    kube.wait_for(
        "vision's quota status",
        lambda: (kube.get("v1", "ResourceQuota", "gpuaas-team-quota", A) or {}).get("status", {}).get("hard"),
        60,
    )
    kube.create(hog, as_=WHO)
    starved = job(A, "starved", A, {GPU: "4"})
    starved["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    kube.create(starved, as_=WHO)
    try:
        # Kueue does not read ResourceQuota: it admits (192 cpu nominal are free to it) ...
        admitted_at = kube.wait_for(
            "Kueue admits the Job", lambda: _since(workload_of(kube, A, "starved"), "Admitted"), 90
        )
        assert gpu_usage(kube, A)["total"] == "4" or kube.wait_for(
            "the ClusterQueue counts it", lambda: gpu_usage(kube, A)["total"] == "4", 30
        )
        # ... and the real ResourceQuota admission refuses the Job controller's pod.
        refusal = kube.wait_for(
            "the pod refused by the ResourceQuota",
            lambda: [
                e["message"]
                for e in kube.list("v1", "Event", A)
                if e.get("involvedObject", {}).get("name") == "starved" and e.get("reason") == "FailedCreate"
            ],
            60,
        )
        assert "exceeded quota: gpuaas-team-quota" in refusal[0] and "requests.cpu" in refusal[0], refusal
        # After the timeout Kueue evicts it and gives the quota back; the Job is held again.
        evicted_at = kube.wait_for(
            "Kueue evicts the workload for PodsReadyTimeout",
            lambda: _since(workload_of(kube, A, "starved"), "Evicted", "PodsReadyTimeout"),
            TIMEOUT + 90,
        )
        assert evicted_at - admitted_at >= TIMEOUT - 1, (admitted_at, evicted_at)
        kube.wait_for(
            "the Job suspended again", lambda: (kube.get("batch/v1", "Job", "starved", A) or {})["spec"]["suspend"], 30
        )
        kube.wait_for("the quota given back", lambda: gpu_usage(kube, A)["total"] == "0", 60)
        cq = kube.get(KUEUE_API, "ClusterQueue", A) or {}
        assert cq["status"].get("admittedWorkloads", 0) == 0, cq["status"]
    finally:
        kube.delete("v1", "Pod", "notebook", A)
        kube.delete("batch/v1", "Job", "starved", A)
