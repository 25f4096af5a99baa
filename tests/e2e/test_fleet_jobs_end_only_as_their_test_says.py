"""The fleet's KWOK stages: a Job's pod runs until its test says how it ends (e2e/fleet.py).

A team's training Job must hold its GPUs while a test looks at placement and preemption (KWOK's own
default completes every Job pod at once); a proof Job can be made to pass or fail. Without the
annotation the pod keeps running; ``succeed`` completes the Job, ``fail`` fails it.
"""

from __future__ import annotations

import time
from typing import Any, Final

from e2e.fleet import OUTCOME
from tests.e2e.conftest import StackFleet
from tests.e2e.jobs import PAUSE

NS: Final = "e2e-outcomes"


def _job(name: str, outcome: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {OUTCOME: outcome}} if outcome else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": meta,
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": PAUSE}]},
            },
        },
    }


def _conditions(sf: StackFleet, name: str) -> dict[str, str]:
    job = sf.kube.get("batch/v1", "Job", name, NS) or {}
    return {c["type"]: c["status"] for c in job.get("status", {}).get("conditions") or []}


def test_a_jobs_pod_runs_until_its_test_says_succeed_or_fail(onprem_fleet: StackFleet) -> None:
    kube = onprem_fleet.kube
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    try:
        for name, outcome in (("runs", None), ("passes", "succeed"), ("fails", "fail")):
            kube.create(_job(name, outcome))
        kube.wait_for("passes Complete", lambda: _conditions(onprem_fleet, "passes").get("Complete") == "True", 90)
        kube.wait_for("fails Failed", lambda: _conditions(onprem_fleet, "fails").get("Failed") == "True", 90)
        time.sleep(3)  # longer than KWOK takes to complete a pod it means to complete
        (pod,) = kube.list("v1", "Pod", NS, selector="batch.kubernetes.io/job-name=runs")
        assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"], pod["status"]
        assert "Complete" not in _conditions(onprem_fleet, "runs")
    finally:
        kube.delete("v1", "Namespace", NS)
