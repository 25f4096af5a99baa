"""A GPU node drained or lost: team pods move to the rest of their flavor's nodes, node agents stay.

On the onprem fleet with Kueue (tests/e2e/fleet_kueue.py), a vision training Job that Kueue
admitted runs its pods on h100-full nodes. Then:

- ``kubectl drain`` of one of those nodes, with the built kubectl (the control plane's own version):
  it cordons the node and evicts through the eviction API, so a PodDisruptionBudget is honoured —
  with ``minAvailable`` at every pod the eviction is refused and the drain times out (the node
  keeps its pod), with one pod of slack the drain goes through; the Job (``podFailurePolicy``
  ignoring disruptions, as a training Job that survives maintenance is written) makes a new pod,
  which the scheduler places on another h100-full node; the platform's DaemonSets' pods stay on the
  drained node (``--ignore-daemonsets``: they are what a node needs to come back).
- a node going NotReady (its kubelet reports it): the node lifecycle controller taints it
  ``node.kubernetes.io/not-ready:NoExecute``; a team pod tolerating that for 2 s is evicted and
  replaced on another node, the node agents (which tolerate it) stay, and nothing new lands there.

Adding nodes to a pool (AKS) is in tests/e2e/test_kueue_admitted_jobs_run_on_their_flavors_nodes.py
(the pool scaled by the autoscaler takes the admitted Job's pod) and in the proof tests.
"""

from __future__ import annotations

import subprocess
from typing import Any, Final

from e2e.fleet import NOT_READY_TAINT
from e2e.kube import Kube, Obj
from tests.e2e.conftest import PLACEMENT_SUMMARY
from tests.e2e.fleet_kueue import KueueFleet, admitted, cleanup, flavor_nodes, job_pods, member, team_job, wait_running

GPU: Final = "nvidia.com/gpu"


def _resilient(job: Obj, tolerate_not_ready: int | None = None) -> Obj:
    """A training Job that survives maintenance: a disruption is not a failure of the Job.

    With ``tolerate_not_ready`` the pod leaves a NotReady node after that many seconds; the Job
    replaces a pod as soon as it is terminating (on a node whose kubelet is gone it stays
    terminating until the node returns), and counts it against ``backoffLimit``.
    """
    spec = job["spec"]
    spec["backoffLimit"] = 6
    spec["template"].setdefault("metadata", {})["labels"] = {"app": job["metadata"]["name"]}
    if tolerate_not_ready is None:
        spec["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
        return job
    spec["podReplacementPolicy"] = "TerminatingOrFailed"
    toleration = {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute"}
    spec["template"]["spec"]["tolerations"] = [{**toleration, "tolerationSeconds": tolerate_not_ready}]
    return job


def _pdb(ns: str, app: str, min_available: int) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": ns},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }


def _agents_on(kf: KueueFleet, node: str) -> set[str]:
    """The platform DaemonSets with a Running pod on ``node``."""
    out: set[str] = set()
    for ds in kf.kube.list("apps/v1", "DaemonSet", kf.cfg.network.namespace):
        name = ds["metadata"]["name"]
        if kf.fleet.daemonset_nodes(kf.cfg.network.namespace, name).get(node) == "Running":
            out.add(name)
    return out


def _nodes_of(kube: Kube, ns: str, job: str) -> list[str]:
    return sorted(p["spec"].get("nodeName") or "" for p in job_pods(kube, ns, job))


def _healthy(kube: Kube, ns: str, name: str) -> int:
    pdb = kube.get("policy/v1", "PodDisruptionBudget", name, ns) or {}
    return int(pdb.get("status", {}).get("currentHealthy", 0))


def _drain(kf: KueueFleet, node: str, timeout: str) -> subprocess.CompletedProcess[str]:
    return kf.cp.kubectl(
        "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={timeout}", check=False, timeout=180
    )


def test_a_drained_gpu_node_moves_team_pods_honours_the_pdb_and_keeps_node_agents(onprem_kueue: KueueFleet) -> None:
    kf, kube = onprem_kueue, onprem_kueue.kube
    team = next(t for t in kf.cfg.teams if t.name == "vision")
    full = flavor_nodes(kf, "h100-full", GPU)
    name = "train"
    kube.create(_resilient(team_job(team, name, {GPU: "8"}, parallelism=2)), as_=member(team))
    drained = ""
    try:
        kube.wait_for("admitted", lambda: admitted(kube, team.ns, name) == [name], 120)
        pods = wait_running(kf, team, name, pods=2)
        before = sorted(p["spec"]["nodeName"] for p in pods)
        assert len(set(before)) == 2 and set(before) <= full, before
        drained = before[0]
        agents = _agents_on(kf, drained)
        assert agents, f"no node agent runs on {drained}"

        # The PDB allows no disruption: the eviction API refuses, kubectl retries until its timeout.
        kube.apply(_pdb(team.ns, name, 2))
        kube.wait_for("the PDB counts both pods", lambda: _healthy(kube, team.ns, name) == 2, timeout=60)
        refused = _drain(kf, drained, "15s")
        assert refused.returncode != 0, refused.stdout
        assert "disruption budget" in refused.stderr + refused.stdout, refused.stderr
        assert drained in _nodes_of(kube, team.ns, name), "the PDB kept the pod on the node"
        node = kube.get("v1", "Node", drained) or {}
        assert node["spec"].get("unschedulable") is True, "drain cordons first"

        # One pod of slack: the drain evicts it, the Job replaces it on another h100-full node.
        kube.apply(_pdb(team.ns, name, 1))
        done = _drain(kf, drained, "120s")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "evicted" in done.stdout, done.stdout
        after = kube.wait_for(
            "two pods Running again, none on the drained node",
            lambda: (
                (n := _nodes_of(kube, team.ns, name))
                and len(n) == 2
                and drained not in n
                and all(p.get("status", {}).get("phase") == "Running" for p in job_pods(kube, team.ns, name))
                and n
            ),
            timeout=120,
        )
        assert set(after) <= full - {drained}, after
        job = kube.get("batch/v1", "Job", name, team.ns) or {}
        assert not job.get("status", {}).get("failed"), job.get("status")
        assert _agents_on(kf, drained) == agents, "the node agents stay on the drained node"
        PLACEMENT_SUMMARY.append(
            f"onprem  drain {drained}: team pods {before} -> {after}; agents kept: {sorted(agents)}; PDB refusal seen"
        )
    finally:
        kube.delete("policy/v1", "PodDisruptionBudget", name, team.ns)
        if drained:
            kf.cp.kubectl("uncordon", drained, check=False)
        cleanup(kf, [(team, name)])


def _tainted(kube: Kube, node: str, key: str, effect: str) -> bool:
    taints: list[dict[str, Any]] = (kube.get("v1", "Node", node) or {}).get("spec", {}).get("taints") or []
    return any(t["key"] == key and t["effect"] == effect for t in taints)


def test_a_gpu_node_going_not_ready_loses_its_team_pods_and_keeps_node_agents(onprem_kueue: KueueFleet) -> None:
    kf, kube = onprem_kueue, onprem_kueue.kube
    team = next(t for t in kf.cfg.teams if t.name == "vision")
    full = flavor_nodes(kf, "h100-full", GPU)
    name = "fragile"
    kube.create(_resilient(team_job(team, name, {GPU: "8"}), tolerate_not_ready=2), as_=member(team))
    lost = ""
    try:
        kube.wait_for("admitted", lambda: admitted(kube, team.ns, name) == [name], 120)
        (pod,) = wait_running(kf, team, name)
        lost = pod["spec"]["nodeName"]
        agents = _agents_on(kf, lost)
        kf.fleet.set_not_ready(lost)
        kube.wait_for(f"{lost} not-ready:NoExecute", lambda: _tainted(kube, lost, NOT_READY_TAINT, "NoExecute"), 90)
        moved = kube.wait_for(
            "the team pod evicted and replaced on another node",
            lambda: (n := _nodes_of(kube, team.ns, name)) and n != [lost] and lost not in n and n,
            timeout=120,
        )
        (pod,) = wait_running(kf, team, name)
        assert pod["spec"]["nodeName"] in full - {lost}, moved
        # DaemonSet pods tolerate not-ready (the DaemonSet controller adds it): they stay.
        assert _agents_on(kf, lost) >= agents or all(
            kf.fleet.daemonset_nodes(kf.cfg.network.namespace, a).get(lost) for a in agents
        ), "node agents stay on the NotReady node"
        PLACEMENT_SUMMARY.append(f"onprem  NotReady {lost}: team pod moved to {pod['spec']['nodeName']}, agents stay")
    finally:
        cleanup(kf, [(team, name)])
        if lost:
            kf.fleet.attach(lost)
            kf.fleet.wait_schedulable([lost], timeout=120)
