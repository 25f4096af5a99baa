"""The one batch Job a team member writes for Kueue, as every e2e test and the fleet benchmark send it.

One pause container (KWOK runs it, or nothing does on a bare control plane), its requests the
given limits plus CPU and memory, ``restartPolicy: Never`` and no retries; the queue label when a
queue is named, the priority label when a class is. Suspended by default as Kueue's docs tell
users to write it (Kueue unsuspends what it admits); ``suspend=False`` for what Kueue's own
webhook must decide.
"""

from __future__ import annotations

from typing import Final

from components.queueing.admission import PRIORITY_LABEL, QUEUE_LABEL
from e2e.kube import Obj

PAUSE: Final = "registry.k8s.io/pause:3.10"


def queued_job(
    ns: str,
    name: str,
    queue: str | None,
    limits: dict[str, str],
    suspend: bool = True,
    *,
    priority: str | None = None,
    parallelism: int = 1,
    cpu: str = "100m",
    memory: str = "128Mi",
) -> Obj:
    labels = {QUEUE_LABEL: queue} if queue is not None else {}
    if priority:
        labels[PRIORITY_LABEL] = priority
    meta: Obj = {"name": name, "namespace": ns, **({"labels": labels} if labels else {})}
    spec: Obj = {"suspend": suspend, "backoffLimit": 0}
    if parallelism != 1:
        spec |= {"parallelism": parallelism, "completions": parallelism}
    container = {
        "name": "main",
        "image": PAUSE,
        "resources": {"requests": {"cpu": cpu, "memory": memory, **limits}, "limits": limits},
    }
    spec["template"] = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
