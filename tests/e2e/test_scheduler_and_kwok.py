"""The pieces of a simulated fleet work together: the real kube-scheduler places pods on KWOK nodes.

A control plane of its own with kube-scheduler (as ``system:kube-scheduler``, bootstrap RBAC only)
and KWOK (e2e/controlplane.py). One KWOK node advertises a GPU extended resource the way a device
plugin would (capacity and allocatable of ``nvidia.com/gpu``); a pod asking for one GPU is bound to
it by the scheduler and made Running by KWOK; a pod asking for more GPUs than any node has stays
Pending with the scheduler's own reason. The controllers' pods land there too: a DaemonSet's pod
and a Job's pod (KWOK's pod-complete stage makes the Job succeed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.controlplane import ControlPlane
from e2e.kube import Kube
from e2e.kwok_nodes import kwok_node
from tests.e2e.jobs import PAUSE

NODE = "kwok-gpu-0"
GPU = "nvidia.com/gpu"
GPUS = 4
NS = "fleet-smoke"


@pytest.fixture(scope="module")
def fleet(pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    cp = ControlPlane(scheduler=True, kwok=True)
    cp.start()
    try:
        kube = cp.kube
        kube.create(kwok_node(NODE, capacity={GPU: str(GPUS)}))
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        # Ready once KWOK's node-initialize stage ran; schedulable once the node lifecycle
        # controller has taken off the not-ready taint that admission (TaintNodesByCondition) put on.
        kube.wait_for(f"{NODE} Ready (KWOK)", lambda: _ready(kube.get("v1", "Node", NODE)), timeout=60)
        kube.wait_for(f"{NODE} without the not-ready taint", lambda: not _not_ready_taint(kube), timeout=60)
        kube.wait_for(
            f"the default ServiceAccount in {NS}", lambda: kube.get("v1", "ServiceAccount", "default", NS), timeout=60
        )
        yield cp
    finally:
        cp.stop()


def _ready(node: dict[str, Any] | None) -> bool:
    conds = (node or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def _not_ready_taint(kube: Kube) -> bool:
    node = kube.get("v1", "Node", NODE) or {}
    return any(t["key"] == "node.kubernetes.io/not-ready" for t in node.get("spec", {}).get("taints", []))


def _pod(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [{"name": "main", "image": PAUSE, "resources": {"limits": {GPU: str(gpus)}}}],
        },
    }


def test_the_node_advertises_its_gpus_and_kwok_keeps_it_ready(fleet: ControlPlane) -> None:
    node = fleet.kube.get("v1", "Node", NODE)
    assert node is not None and _ready(node)
    assert node["status"]["capacity"][GPU] == str(GPUS)
    assert node["status"]["allocatable"][GPU] == str(GPUS)
    # KWOK's heartbeat keeps the node's lease, as a kubelet does (held by KWOK's controller id).
    lease = fleet.kube.get("coordination.k8s.io/v1", "Lease", NODE, "kube-node-lease")
    assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 40 and lease["spec"]["renewTime"]
    # The node lifecycle controller took the not-ready taint off once the node was Ready.
    assert not _not_ready_taint(fleet.kube)


def test_a_gpu_pod_is_bound_by_the_scheduler_and_run_by_kwok(fleet: ControlPlane) -> None:
    kube = fleet.kube
    kube.create(_pod("one-gpu", 1))
    pod = kube.wait_for(
        "one-gpu Running",
        lambda: (p := kube.get("v1", "Pod", "one-gpu", NS)) and p["status"].get("phase") == "Running" and p,
        timeout=90,
    )
    assert pod["spec"]["nodeName"] == NODE
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    # The scheduler's event broadcaster writes the event on its own time: wait for it, bounded.
    kube.wait_for(
        f"the Scheduled event of one-gpu naming {NODE}",
        lambda: [
            e
            for e in kube.list("v1", "Event", NS)
            if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "one-gpu" and NODE in e["message"]
        ],
        timeout=90,
    )
    # kubectl of the same version reads it too.
    out = fleet.kubectl("get", "pod", "one-gpu", "-n", NS, "-o", "jsonpath={.spec.nodeName} {.status.phase}")
    assert out.stdout == f"{NODE} Running"


def test_a_pod_no_node_can_hold_stays_pending_with_the_schedulers_reason(fleet: ControlPlane) -> None:
    kube = fleet.kube
    kube.create(_pod("too-many-gpus", GPUS + 1))

    def failed() -> list[dict[str, Any]]:
        return [
            e
            for e in kube.list("v1", "Event", NS)
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "too-many-gpus"
        ]

    events = kube.wait_for("FailedScheduling of too-many-gpus", failed, timeout=90)
    message = events[0]["message"]
    assert "0/1 nodes are available" in message and f"Insufficient {GPU}" in message, message

    # The scheduler records the event and patches the pod's status separately: on a busy machine the
    # event can be read before the PodScheduled condition lands, so wait for the condition too.
    def scheduled_condition() -> dict[str, Any] | None:
        pod = kube.get("v1", "Pod", "too-many-gpus", NS)
        assert pod is not None
        conditions = pod.get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    cond = kube.wait_for("the PodScheduled condition of too-many-gpus", scheduled_condition, timeout=90)
    pod = kube.get("v1", "Pod", "too-many-gpus", NS)
    assert pod is not None and pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")


def test_controllers_pods_are_placed_too(fleet: ControlPlane) -> None:
    kube: Kube = fleet.kube
    labels = {"app": "smoke-ds"}
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "smoke-ds", "namespace": NS},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "main", "image": PAUSE}]},
                },
            },
        }
    )
    kube.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "smoke-job", "namespace": NS},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": PAUSE}]},
                },
            },
        }
    )
    ds = kube.wait_for(
        "smoke-ds ready on every node",
        lambda: (
            (d := kube.get("apps/v1", "DaemonSet", "smoke-ds", NS))
            and d.get("status", {}).get("numberReady") == 1
            and d
        ),
        timeout=90,
    )
    assert ds["status"]["desiredNumberScheduled"] == 1
    (pod,) = kube.list("v1", "Pod", NS, selector="app=smoke-ds")
    assert pod["spec"]["nodeName"] == NODE and pod["status"]["phase"] == "Running"
    job = kube.wait_for(
        "smoke-job Complete",
        lambda: (j := kube.get("batch/v1", "Job", "smoke-job", NS)) and j.get("status", {}).get("succeeded") == 1 and j,
        timeout=90,
    )
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
