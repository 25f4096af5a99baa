"""A simulated fleet: the real control plane with kube-scheduler and KWOK, a stack's nodes, its plan.

What Kueue and KAI do to test their schedulers at scale, for the whole platform: every node of a
stack is a KWOK node (KWOK plays its kubelet: the node is Ready and keeps its lease, pods bound to it
run), and the real kube-scheduler places every pod the controllers create, so a DaemonSet reaches
exactly the nodes its selector and tolerations allow and a Job's pods land where a node has what
they ask for, or stay Pending with the scheduler's reason.

The nodes are handed in (Node manifests): the e2e suite's oracle of what a real node of each stack
carries is tests/e2e/fleet_nodes.py, written from upstream documentation, and ``make cluster`` and
``make bench-fleet`` take the same nodes from there.

KWOK's stages are its defaults but two (:func:`fleet_stages`): a Job's pod completes only when its
pod template says so (annotation :data:`OUTCOME`: ``succeed`` or ``fail``), so a team's training Job
keeps its GPUs for as long as a test needs it to, and a proof Job can be made to pass or fail; and a
deleted pod is made terminal before it goes, as a kubelet does.

    fleet = Fleet.start([spec.manifest() for spec in fleet_nodes(cfg)], run=offline_run("onprem"))
    fleet.kubectl("get", "nodes")
    fleet.stop()
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import yaml

from components.plan.offline import Run
from e2e.controlplane import ControlPlane
from e2e.kube import Kube, Obj
from e2e.kwok_nodes import KWOK_NODE_ANNOTATION, KWOK_NODE_VALUE
from e2e.plan_apply import Applied, apply_plan

#: Pod annotation that makes KWOK finish a Job's pod: ``succeed`` (exit 0) or ``fail`` (exit 1).
#: Without it the pod keeps running, as a training Job does.
OUTCOME: Final = "e2e.gpuaas.io/outcome"
NOT_READY_TAINT: Final = "node.kubernetes.io/not-ready"
#: kube-controller-manager's ``--node-monitor-grace-period`` for the fleet (Kubernetes' default is
#: 50 s): KWOK renews every node's lease from one process, and on a loaded 2-core machine with 1000
#: nodes it falls behind by more than that (measured: 107 of 1000 nodes marked NotReady while the
#: plan applied). A fault test marks a node NotReady itself (:meth:`Fleet.set_not_ready`).
NODE_MONITOR_GRACE: Final = "3m"
UNREACHABLE_TAINT: Final = "node.kubernetes.io/unreachable"


#: Pods whose readiness a process of the test plays instead of KWOK (KWOK still binds and deletes
#: them): Kueue's manager pods, Ready exactly while the test's Kueue manager serves (e2e/kueue.py).
PLAYED_PODS: Final = ("app.kubernetes.io/name", "control-plane", "kueue/controller-manager")
#: The label Helm puts on what a chart renders (its hook Jobs' pods included).
HELM_MANAGED: Final = ("app.kubernetes.io/managed-by", "Helm")


def fleet_stages(default_stages: str) -> str:
    """KWOK's default stages with ``pod-complete`` gated on :data:`OUTCOME`, a ``pod-fail`` stage,
    ``pod-ready`` again for pods a node's NotReady spell marked not Ready, and deletion as a kubelet
    does it: a deleted pod that is still running is first made terminal
    (``Failed``, its containers terminated as by SIGTERM), then removed. A kubelet sets the terminal
    phase of a pod it stops (Kubernetes docs, "Pod phase": since 1.27 a deleted pod goes to a terminal
    phase), and the Job controller removes its tracking finalizer only from a terminal pod; KWOK's
    default ``pod-delete`` deletes at once, which leaves a Job's evicted pod terminating for ever.
    A chart's own Jobs (Helm hooks: the operators' CRD upgrade, keep-ncp) complete as KWOK's
    default does, without doing their work (their images cannot run here); and :data:`PLAYED_PODS`
    are left to the process that plays them.
    """
    docs = [d for d in yaml.safe_load_all(default_stages) if d]
    out: list[dict[str, Any]] = []
    for doc in docs:
        if doc["metadata"]["name"] == "pod-ready":
            doc = _ready_again(doc)
            first, second, value = PLAYED_PODS
            key = f'(.metadata.labels["{first}"] // "") + "/" + (.metadata.labels["{second}"] // "")'
            doc["spec"]["selector"]["matchExpressions"].append({"key": key, "operator": "NotIn", "values": [value]})
            out.append(doc)
        elif doc["metadata"]["name"] == "pod-delete":
            out += [_terminate(doc), _when_terminal(doc)]
        elif doc["metadata"]["name"] == "pod-complete":
            chart = yaml.safe_load(yaml.safe_dump(doc))
            chart["metadata"]["name"] = "pod-complete-chart-job"
            label, value = HELM_MANAGED
            chart["spec"]["selector"]["matchExpressions"].append(
                {"key": f'.metadata.labels["{label}"]', "operator": "In", "values": [value]}
            )
            out.append(chart)
            complete = _with_outcome(doc, "succeed")
            failed = _with_outcome(doc, "fail")
            failed["metadata"]["name"] = "pod-fail"
            template = failed["spec"]["next"]["statusTemplate"]
            failed["spec"]["next"]["statusTemplate"] = (
                template.replace("exitCode: 0", "exitCode: 1")
                .replace("reason: Completed", "reason: Error")
                .replace("phase: Succeeded", "phase: Failed")
            )
            out += [complete, failed]
        else:
            out.append(doc)
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in out)


_TERMINATED = """\
{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 143
      finishedAt: {{ $now | Quote }}
      reason: Error
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Failed
"""


def _ready_again(ready: dict[str, Any]) -> dict[str, Any]:
    """``pod-ready`` for Running pods too: when a node was NotReady the node lifecycle controller
    marks its pods not Ready (``MarkPodsNotReady``); a kubelet reports them Ready again once it is
    back, KWOK's default stage (Pending pods only) never would."""
    stage: dict[str, Any] = yaml.safe_load(yaml.safe_dump(ready))
    for expr in stage["spec"]["selector"]["matchExpressions"]:
        if expr["key"] == ".status.phase":
            expr["values"] = ["Pending", "Running"]
    return stage


def _terminate(delete: dict[str, Any]) -> dict[str, Any]:
    stage: dict[str, Any] = yaml.safe_load(yaml.safe_dump(delete))
    stage["metadata"]["name"] = "pod-terminate"
    stage["spec"]["selector"]["matchExpressions"].append(
        {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]}
    )
    stage["spec"]["next"] = {"statusTemplate": _TERMINATED}
    return stage


def _when_terminal(delete: dict[str, Any]) -> dict[str, Any]:
    stage: dict[str, Any] = yaml.safe_load(yaml.safe_dump(delete))
    stage["spec"]["selector"]["matchExpressions"].append(
        {"key": ".status.phase", "operator": "In", "values": ["Succeeded", "Failed"]}
    )
    return stage


def _with_outcome(stage: dict[str, Any], outcome: str) -> dict[str, Any]:
    stage = dict(yaml.safe_load(yaml.safe_dump(stage)))  # a deep copy
    exprs = stage["spec"]["selector"]["matchExpressions"]
    exprs.append({"key": f'.metadata.annotations["{OUTCOME}"]', "operator": "In", "values": [outcome]})
    return stage


#: What the operators would have created before our objects need it (the e2e plays them): the Network
#: Operator's ``multus`` ServiceAccount in its namespace, which gpuaas's Multus kubeconfig refresher
#: runs as (network-operator v26.4.1 manifests/state-multus-cni/0020-service_account.yml).
OPERATOR_SERVICE_ACCOUNTS: Final = ("multus",)


def play_operators(kube: Kube, network_namespace: str) -> None:
    """Create what the operators create and gpuaas's objects use, where the plan made their namespace."""
    if kube.get("v1", "Namespace", network_namespace) is None:
        return
    for name in OPERATOR_SERVICE_ACCOUNTS:
        kube.apply(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": network_namespace}}
        )


def _ready(node: Obj) -> bool:
    conds = node.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def _schedulable(node: Obj) -> bool:
    taints = node.get("spec", {}).get("taints") or []
    return _ready(node) and not any(t["key"] in (NOT_READY_TAINT, UNREACHABLE_TAINT) for t in taints)


@dataclasses.dataclass
class Fleet:
    """A running control plane with KWOK nodes (and, once :meth:`apply`'d, a stack's plan)."""

    cp: ControlPlane
    nodes: list[Obj]
    applied: list[Applied] = dataclasses.field(default_factory=list)
    #: Seconds from start to every node Ready and schedulable.
    nodes_ready_in: float = 0.0

    @property
    def kube(self) -> Kube:
        return self.cp.kube

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    @classmethod
    def start(
        cls,
        nodes: Sequence[Obj],
        *,
        run: Run | None = None,
        kubernetes: str | None = None,
        workdir: Path | None = None,
        controller_manager_args: Sequence[str] = (),
        timeout: float = 600.0,
    ) -> Fleet:
        """Start the control plane with kube-scheduler and KWOK, create ``nodes``, apply ``run``."""
        cp = ControlPlane(
            workdir=workdir,
            kubernetes=kubernetes,
            scheduler=True,
            kwok=True,
            controller_manager_args=(f"--node-monitor-grace-period={NODE_MONITOR_GRACE}", *controller_manager_args),
        )
        stages = cp.workdir / "kwok-fleet-stages.yaml"
        stages.write_text(fleet_stages((cp.kwok_bin_dir / "kwok-stages.yaml").read_text()))
        cp.kwok_config = stages
        cp.start()
        fleet = cls(cp, [])
        try:
            t0 = time.monotonic()
            fleet.add_nodes(nodes, timeout=timeout)
            fleet.nodes_ready_in = time.monotonic() - t0
            if run is not None:
                fleet.apply(run)
        except BaseException:
            cp.stop()
            raise
        return fleet

    def stop(self) -> None:
        self.cp.stop()

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        return self.cp.kubectl(*args, check=check, timeout=timeout).stdout

    # ---------------------------------------------------------------------------------------
    def add_nodes(self, nodes: Iterable[Obj], timeout: float = 300.0) -> None:
        """Create ``nodes`` (KWOK's) and wait until each is Ready and without the not-ready taint.

        Admission (TaintNodesByCondition) puts ``node.kubernetes.io/not-ready:NoSchedule`` on a new
        Node; the node lifecycle controller lifts it once KWOK has reported the node Ready.
        """
        nodes = list(nodes)
        # A few at a time: one create is a round trip, and 1000 of them in a row are minutes.
        self.kube.resource("v1", "Node")  # discovery once, before the threads
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self.kube.create, nodes))
        self.nodes += nodes
        self.wait_schedulable([n["metadata"]["name"] for n in nodes], timeout)

    def wait_schedulable(self, names: Sequence[str], timeout: float = 300.0) -> None:
        want = set(names)

        def pending() -> set[str]:
            ok = {n["metadata"]["name"] for n in self.kube.list("v1", "Node") if _schedulable(n)}
            return want - ok

        left: set[str] = set(want)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = pending()
            if not left:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{len(left)} nodes not Ready and schedulable in {timeout:.0f} s: {sorted(left)[:10]}")

    def apply(self, run: Run) -> list[Applied]:
        """The plan, in install order (e2e/plan_apply.py): its NodePatches land on the KWOK nodes."""
        self.applied = apply_plan(self.kube, run)
        return self.applied

    def publish(self, objs: Iterable[Obj], manager: str = "gpuaas-e2e-fleet") -> None:
        """Objects a node agent would publish (a DRA driver's ResourceSlices), by server-side apply."""
        for obj in objs:
            self.kube.apply(obj, manager=manager)

    # ---------------------------------------------------------------------------------------
    # faults
    def detach(self, node: str) -> None:
        """KWOK stops playing this node's kubelet (no more heartbeats or pod updates)."""
        self.kube.patch("v1", "Node", node, None, {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: None}}})

    def attach(self, node: str) -> None:
        """KWOK plays this node's kubelet again (it reports the node Ready)."""
        annotations = {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE}
        self.kube.patch("v1", "Node", node, None, {"metadata": {"annotations": annotations}})

    def set_not_ready(self, node: str, reason: str = "KubeletNotReady") -> None:
        """The node's kubelet reports NotReady (after :meth:`detach`, so KWOK does not answer for it)."""
        self.detach(node)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        current = self.kube.get("v1", "Node", node) or {}
        conds = [c for c in current.get("status", {}).get("conditions") or [] if c["type"] != "Ready"]
        conds.append(
            {
                "type": "Ready",
                "status": "False",
                "reason": reason,
                "message": "container runtime network not ready (e2e fault)",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        )
        self.kube.patch("v1", "Node", node, None, {"status": {"conditions": conds}}, sub="status")

    # ---------------------------------------------------------------------------------------
    # what runs where
    def pods(self, namespace: str | None = None, selector: str | None = None) -> list[Obj]:
        return self.kube.list("v1", "Pod", namespace, selector=selector)

    def daemonset_nodes(self, namespace: str, name: str) -> dict[str, str]:
        """node -> phase of each pod the DaemonSet owns (``""``: not bound to a node)."""
        out: dict[str, str] = {}
        for pod in self.pods(namespace):
            owners = pod["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "DaemonSet" and o.get("name") == name for o in owners):
                out[pod["spec"].get("nodeName") or ""] = pod.get("status", {}).get("phase", "")
        return out


@contextmanager
def running(nodes: Sequence[Obj], **kw: Any) -> Iterator[Fleet]:
    fleet = Fleet.start(nodes, **kw)
    try:
        yield fleet
    finally:
        fleet.stop()
