"""Kueue admits a GPU Job that also asks for scratch space or huge pages; quota still holds (issue 35, item 6).

Kueue v0.19.2 never admits a workload requesting a resource its ClusterQueue does not cover
(pkg/scheduler/flavorassigner ``resource ... unavailable in ClusterQueue``). The queues account
cpu, memory, the GPU kinds and the partition resource; the rest of Kubernetes' pod resources,
``ephemeral-storage`` and ``hugepages-<size>``, no team quota counts, so the plan's Kueue
Configuration leaves them out (``resources.excludeResourcePrefixes``,
:data:`components.model.elastic.UNACCOUNTED_PREFIXES`).

Here, on the onprem plan with Kueue's own manager running the plan's Configuration, as a member of
vision: a Job asking 2 GPUs, 10Gi of ``ephemeral-storage`` and 64Mi of ``hugepages-2Mi`` is
admitted and Kueue books only what the queue accounts; its twin, the same Job asking more GPUs
than vision's ceiling (12 nominal + 8 borrowable), waits, and Kueue says why in GPU terms.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest

from components.model import elastic
from components.model.resources import GPU
from e2e.controlplane import ControlPlane
from tests.conftest import offline_run
from tests.e2e.kueue_manager import CFG, Kueue, condition, delete_job, job, kueue_plane, member, workload_of

A: Final = "vision"
WHO: Final = member(next(t for t in CFG.teams if t.name == A))
#: What no queue accounts, beside the GPUs.
EXTRA: Final = {"ephemeral-storage": "10Gi", "hugepages-2Mi": "64Mi"}


@pytest.fixture(scope="module")
def kueue(pytestconfig: pytest.Config) -> Iterator[tuple[ControlPlane, Kueue]]:
    yield from kueue_plane(pytestconfig, "onprem plan with Kueue (unaccounted resources)", offline_run("onprem"))


def _message(wl: dict[str, Any] | None, kind: str) -> str:
    for c in (wl or {}).get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c.get("message", ""))
    return ""


def test_the_plan_tells_kueue_to_leave_out_what_no_queue_accounts(kueue: tuple[ControlPlane, Kueue]) -> None:
    excluded = kueue[1].configuration()["resources"]["excludeResourcePrefixes"]
    assert set(elastic.UNACCOUNTED_PREFIXES) <= set(excluded), excluded


def test_a_gpu_job_with_scratch_space_and_huge_pages_is_admitted(kueue: tuple[ControlPlane, Kueue]) -> None:
    kube = kueue[0].kube
    kube.create(job(A, "scratch", A, {GPU: "2", **EXTRA}), as_=WHO)
    try:
        wl = kube.wait_for(
            "Kueue admits vision's Job asking ephemeral-storage and hugepages-2Mi",
            lambda: (w := workload_of(kube, A, "scratch")) and condition(w, "Admitted") == "True" and w,
            90,
        )
        # The Workload keeps the pod's requests as written; Kueue booked only what the queue accounts.
        (requests,) = [c["resources"]["requests"] for c in wl["spec"]["podSets"][0]["template"]["spec"]["containers"]]
        assert set(EXTRA) <= set(requests), requests
        (assignment,) = wl["status"]["admission"]["podSetAssignments"]
        assert set(assignment["resourceUsage"]) == {GPU, "cpu", "memory"}, assignment
        assert not (kube.get("batch/v1", "Job", "scratch", A) or {})["spec"]["suspend"]
    finally:
        delete_job(kube, A, "scratch")


def test_a_gpu_job_beyond_the_teams_ceiling_still_waits(kueue: tuple[ControlPlane, Kueue]) -> None:
    """The twin: excluding scratch space and huge pages excludes no GPU from the quota."""
    kube = kueue[0].kube
    kube.create(job(A, "too-big", A, {GPU: "21", **EXTRA}), as_=WHO)
    try:
        message = kube.wait_for(
            "Kueue reports why vision's 21-GPU Job waits",
            lambda: _message(workload_of(kube, A, "too-big"), "QuotaReserved"),
            90,
        )
        # flavorassigner: "insufficient quota for nvidia.com/gpu in flavor ..." (or "insufficient unused quota")
        assert "insufficient" in message and f"for {GPU} in flavor" in message, message
        assert "unavailable in ClusterQueue" not in message, message
        assert condition(workload_of(kube, A, "too-big"), "Admitted") != "True"
        assert (kube.get("batch/v1", "Job", "too-big", A) or {})["spec"]["suspend"] is True
    finally:
        delete_job(kube, A, "too-big")
