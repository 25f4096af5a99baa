"""AKS pools that scale: the fleet adds nodes where the cluster autoscaler would.

The checked-in AKS pools have ``minCount: 0``; the fleet starts each with one node
(tests/e2e/fleet_nodes.py). A pod that no node can hold makes the cluster autoscaler scale up a
pool whose *template node* fits it (kubernetes/autoscaler cluster-autoscaler FAQ, "How does scale-up
work?"): on Azure the template of a scale set is built from its VM size, its labels and taints, and
the resources in its ``k8s.io_cluster-autoscaler_node-template_resources_<name>`` tags (``_`` read
as ``/``; cluster-autoscaler/cloudprovider/azure/README.md, "Resources"), never beyond ``maxCount``.
:func:`scale_for` plays it: it reads the pool's AgentPool from the plan (what Azure is sent), checks
the pod against that template as the autoscaler would, and adds one node of the pool
(:func:`tests.e2e.fleet_nodes.aks_nodes`) — so a pod the template cannot hold never gets a node.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from e2e.kube import Obj
from e2e.plan_apply import _quantity
from tests.e2e.conftest import StackFleet
from tests.e2e.fleet_nodes import AZURE_SIZES, aks_nodes

TEMPLATE_TAG: Final = "k8s.io_cluster-autoscaler_node-template_resources_"


def agent_pools(sf: StackFleet) -> dict[str, dict[str, Any]]:
    """The AgentPools of the plan by pool name (their inputs, as sent to Azure)."""
    return {r.inputs["agentPoolName"]: r.inputs for r in sf.run.of_type("azure-native:containerservice:AgentPool")}


def template_resources(pool: Mapping[str, Any]) -> dict[str, str]:
    """The autoscaler's template node: the VM size's CPU and memory, and the tagged resources."""
    size = AZURE_SIZES[str(pool["vmSize"])]
    out = {"cpu": str(size.cpu), "memory": size.memory, "pods": "110"}
    for tag, value in (pool.get("tags") or {}).items():
        if tag.startswith(TEMPLATE_TAG):
            out[tag.removeprefix(TEMPLATE_TAG).replace("_", "/")] = str(value)
    return out


def _requests(pod: Obj) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for c in pod["spec"]["containers"]:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[k] = out.get(k, Decimal(0)) + (_quantity(str(v)) or Decimal(0))
    return out


def _matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise ValueError(f"operator {op} is not modelled")


def _tolerated(taint: Mapping[str, str], tolerations: list[Mapping[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("key") not in (None, "", taint["key"]):
            continue
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator", "Equal") == "Exists" or t.get("value") == taint.get("value"):
            return True
    return False


def template_fits(sf: StackFleet, pool_name: str, pod: Obj) -> str | None:
    """Why the pool's template node cannot hold ``pod`` (``None``: it can)."""
    pool = agent_pools(sf)[pool_name]
    spec = next(s for s in aks_nodes(sf.cfg) if s.group == pool_name)
    labels = dict(spec.labels)
    pod_spec = pod["spec"]
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return f"nodeSelector {k}={v}"
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(all(_matches(e, labels) for e in t.get("matchExpressions") or []) for t in terms):
        return "node affinity"
    for t in spec.taints:
        if not _tolerated(t, pod_spec.get("tolerations") or []):
            return f"taint {t}"
    have = template_resources(pool)
    for res, n in _requests(pod).items():
        if n > (_quantity(have.get(res, "0")) or Decimal(0)):
            return f"{res}: asks {n}, the template has {have.get(res, '0')}"
    return None


def scale_pool(sf: StackFleet, pool_name: str, count: int) -> list[str]:
    """Grow ``pool_name`` to ``count`` nodes (never beyond its maxCount); the new nodes' names."""
    pool = agent_pools(sf)[pool_name]
    assert count <= int(pool["maxCount"]), f"{pool_name}: {count} nodes is beyond maxCount {pool['maxCount']}"
    counts: dict[str, int] = {}
    for s in sf.specs:
        counts[s.group] = counts.get(s.group, 0) + 1
    have = counts.get(pool_name, 0)
    if count <= have:
        return []
    new = [s for s in aks_nodes(sf.cfg, {**counts, pool_name: count}) if s.group == pool_name][have:]
    sf.fleet.add_nodes([s.manifest() for s in new])
    sf.specs.extend(new)
    return [s.name for s in new]


def scale_for(sf: StackFleet, pod: Obj) -> str | None:
    """The autoscaler for one Pending pod: the pool it would grow by a node (and grows), or ``None``."""
    counts: dict[str, int] = {}
    for s in sf.specs:
        counts[s.group] = counts.get(s.group, 0) + 1
    for name, pool in sorted(agent_pools(sf).items()):
        if counts.get(name, 0) >= int(pool["maxCount"]) or template_fits(sf, name, pod) is not None:
            continue
        scale_pool(sf, name, counts.get(name, 0) + 1)
        return name
    return None
