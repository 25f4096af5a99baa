"""The charts' own DaemonSets: which nodes each is meant for, from the charts' documented behaviour.

The real charts installed with our values (network-operator v26.4.1, gpu-operator v26.7.0, kueue
v0.19.2, all from ../shared/upstream/charts) render exactly one DaemonSet for the tests' own stacks (tests/stacks),
NFD's worker; everything else the charts ship as a DaemonSet is off by their defaults or our values:

- network-operator v26.4.1 Chart.yaml lines 15-16: the ``node-feature-discovery`` subchart is on
  with ``nfd.enabled`` (gpuaas turns it on: it labels the Mellanox nodes, fleet_nodes.py's
  docstring); in it, charts/node-feature-discovery/templates/worker.yaml line 1
  (``if .Values.worker.enable``; values.yaml line 374 ``enable: true``) renders the DaemonSet
  ``<fullname>-worker`` (line 5), where ``fullname`` is ``<release>-node-feature-discovery``
  (templates/_helpers.tpl lines 14-23: the release name does not contain the chart name).
  templates/topologyupdater.yaml line 1 needs ``topologyUpdater.enable`` (values.yaml line 833:
  ``false``). Chart.yaml lines 19-24: the SR-IOV Network Operator and Maintenance Operator
  subcharts are off by default (values.yaml line 30 ``sriovNetworkOperator.enabled: false``).
- gpu-operator v26.7.0 Chart.yaml line 24: its own NFD subchart is on only with ``nfd.enabled``,
  which gpuaas turns off (two NFDs would fight over the same labels; README, GPU Operator). The
  operator's operands (device plugin, dcgm-exporter, MIG Manager, ...) are DaemonSets the operator
  creates at run time, not the chart: tests/e2e/test_daemonsets_reach_exactly_their_nodes.py checks
  the selectors handed to it instead.
- kueue v0.19.2: a Deployment only.

So :data:`EXPECTED` names the one DaemonSet, and :func:`check` fails on any DaemonSet a chart
renders that has no entry here (a new value that turns one on needs its oracle written first).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import yaml

from e2e.kube import Kube
from tests.e2e.conftest import PLACEMENT_SUMMARY
from tests.e2e.fleet_nodes import NodeSpec

#: NFD worker's tolerations: network-operator v26.4.1 values.yaml lines 82-91
#: (``node-feature-discovery.worker.tolerations``), which replace the subchart's default ``[]``
#: (charts/node-feature-discovery/values.yaml line 764); templates/worker.yaml lines 202-205 put
#: them on the pod. Its ``nodeSelector`` and ``affinity`` are the subchart's ``{}`` (values.yaml
#: lines 760 and 776; worker.yaml lines 194-201 render nothing for them): no node is selected out.
NFD_WORKER_TOLERATIONS: Final[tuple[Mapping[str, str], ...]] = (
    {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)

#: What the DaemonSet controller adds to every DaemonSet pod (kubernetes.io/docs/concepts/workloads/
#: controllers/daemonset, "Taints and tolerations"): the node-condition taints, so they never keep
#: a daemon off a node. (``network-unavailable`` only for host-network pods; not needed here.)
DAEMONSET_CONTROLLER_TOLERATIONS: Final[tuple[Mapping[str, str], ...]] = tuple(
    {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect}
    for key, effect in (
        ("not-ready", "NoExecute"),
        ("unreachable", "NoExecute"),
        ("disk-pressure", "NoSchedule"),
        ("memory-pressure", "NoSchedule"),
        ("pid-pressure", "NoSchedule"),
        ("unschedulable", "NoSchedule"),
    )
)


def tolerates(taint: Mapping[str, str], tolerations: Iterable[Mapping[str, str]]) -> bool:
    """Whether a toleration matches ``taint`` (kubernetes.io/docs/concepts/scheduling-eviction/
    taint-and-toleration: same key, or an empty key with ``Exists``; same effect, or none;
    ``Exists``, or ``Equal`` with the same value)."""
    for t in tolerations:
        if t.get("key") not in (None, "", taint["key"]):
            continue
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator", "Equal") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def admits(spec: NodeSpec, tolerations: Iterable[Mapping[str, str]]) -> bool:
    """Whether a pod with ``tolerations`` (and no node selector) may run on ``spec``: every taint
    that keeps pods off (NoSchedule, NoExecute) is tolerated; PreferNoSchedule only prefers."""
    all_tolerations = [*tolerations, *DAEMONSET_CONTROLLER_TOLERATIONS]
    return all(
        tolerates(taint, all_tolerations) for taint in spec.taints if taint["effect"] in ("NoSchedule", "NoExecute")
    )


def nfd_worker_nodes(specs: Sequence[NodeSpec]) -> set[str]:
    """NFD's worker: every node whose taints its tolerations cover (it must label them all: the
    NicClusterPolicy and the GPU Operator select on its labels)."""
    return {s.name for s in specs if admits(s, NFD_WORKER_TOLERATIONS)}


#: (release, DaemonSet) -> (the nodes it is meant for, why), for every DaemonSet the charts render.
EXPECTED: Final[dict[tuple[str, str], tuple[Callable[[Sequence[NodeSpec]], set[str]], str]]] = {
    ("network-operator", "network-operator-node-feature-discovery-worker"): (
        nfd_worker_nodes,
        "NFD worker: no selector, tolerates master/control-plane/nvidia.com/gpu NoSchedule",
    ),
}


def rendered_daemonsets(release: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(namespace, name) of each DaemonSet in a Helm release's rendered manifest."""
    out = []
    for doc in yaml.safe_load_all(release["manifest"]):
        if doc and doc.get("kind") == "DaemonSet":
            out.append((doc["metadata"].get("namespace") or release["namespace"], doc["metadata"]["name"]))
    return out


def _pods(kube: Kube, namespace: str, name: str) -> list[tuple[str, str]]:
    """(node, phase) of every pod the DaemonSet owns (node ``""``: not bound)."""
    out = []
    for pod in kube.list("v1", "Pod", namespace):
        owners = pod["metadata"].get("ownerReferences") or []
        if any(o.get("kind") == "DaemonSet" and o.get("name") == name for o in owners):
            out.append((pod["spec"].get("nodeName") or "", (pod.get("status") or {}).get("phase", "")))
    return out


def table(name: str, expected: set[str], pods: Sequence[tuple[str, str]], why: str) -> str:
    rows = [f"DaemonSet {name} ({why})", f"  {'node':<34} {'expected':<10} scheduled"]
    on: dict[str, list[str]] = {}
    for node, phase in pods:
        on.setdefault(node, []).append(phase)
    for node in sorted(expected | set(on)):
        got = ",".join(on.get(node, [])) or "-"
        rows.append(f"  {node or '(not bound)':<34} {'yes' if node in expected else '-':<10} {got}")
    return "\n".join(rows)


def check(stack: str, kube: Kube, specs: Sequence[NodeSpec], releases: Mapping[str, Mapping[str, Any]]) -> None:
    """Every DaemonSet the charts rendered (``releases``: Helm's release records by name) has one
    Running pod on each node :data:`EXPECTED` means it for, none elsewhere, none Pending."""
    rendered = {(rel_name, ns, ds) for rel_name, rel in releases.items() for ns, ds in rendered_daemonsets(rel)}
    unknown = sorted(f"{r}: {ns}/{ds}" for r, ns, ds in rendered if (r, ds) not in EXPECTED)
    assert not unknown, f"DaemonSets a chart renders with no expected nodes in tests/e2e/chart_daemonsets.py: {unknown}"
    got = {(r, ds) for r, _ns, ds in rendered}
    missing = sorted(f"{r}: {ds}" for r, ds in EXPECTED if r in releases and (r, ds) not in got)
    assert not missing, f"the charts no longer render {missing} (the oracle's premise)"
    assert rendered, f"{stack}: the charts render no DaemonSet at all ({sorted(releases)})"
    for rel_name, ns, name in sorted(rendered):
        oracle, why = EXPECTED[(rel_name, name)]
        expected = oracle(specs)

        def placed(ns: str = ns, name: str = name, expected: set[str] = expected) -> bool:
            pods = _pods(kube, ns, name)
            return sorted(pods) == sorted((n, "Running") for n in expected)

        with contextlib.suppress(TimeoutError):  # the table says what is wrong
            kube.wait_for(f"{ns}/{name}: one Running pod on each of its nodes", placed, timeout=120)
        pods = _pods(kube, ns, name)
        text = table(f"{ns}/{name}", expected, pods, why)
        nodes = [n for n, _ in pods]
        PLACEMENT_SUMMARY.append(
            f"{stack:<7} chart DaemonSet {ns}/{name}: expected {len(expected)}, scheduled {len(set(nodes) - {''})}, "
            f"running {sum(p == 'Running' for _, p in pods)}, elsewhere {len(set(nodes) - expected - {''})}, "
            f"pending {sum(p == 'Pending' for _, p in pods)}"
        )
        PLACEMENT_SUMMARY.append(text)
        assert expected, f"{name}: the oracle means it for no node\n{text}"
        assert sorted(nodes) == sorted(expected), f"one pod on each expected node, none elsewhere\n{text}"
        assert all(phase == "Running" for _, phase in pods), f"none Pending, all Running\n{text}"
        # ... and the DaemonSet controller agrees: it means it for those nodes, and they are ready.
        st = (kube.get("apps/v1", "DaemonSet", name, ns) or {}).get("status") or {}
        assert st.get("desiredNumberScheduled") == len(expected) == st.get("numberReady"), f"{st}\n{text}"
