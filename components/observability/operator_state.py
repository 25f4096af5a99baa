"""The operators' readiness as a metric: kube-state-metrics' custom-resource-state configuration.

Neither the Network Operator nor the GPU Operator exports its policy's ``status.state`` as a
metric gpuaas could scrape without a further ServiceMonitor of its own (the GPU Operator's
``gpu_operator_reconciliation_status`` says whether *a* reconcile succeeded, not which policy is
ready, and the Network Operator has no such gauge). kube-state-metrics reads any object's status
through its custom-resource-state metrics (kube-state-metrics v2.20.0
``docs/metrics/extend/customresourcestate-metrics.md``): a ``StateSet`` over ``status.state``
gives one series per state, 1 for the current one. gpuaas does not install kube-state-metrics,
so :func:`kube_state_metrics_values` renders what the Prometheus stack's kube-state-metrics needs
(the configuration and the RBAC to list the two kinds); docs/notes/alerts.md shows it, and
``GpuaasOperatorStateMetricsAbsent`` fires while it is not in place.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple


class CrKind(NamedTuple):
    group: str
    version: str
    kind: str
    plural: str
    #: The values ``status.state`` may take (the CRD's enum / the API's State constants).
    states: tuple[str, ...]


#: network-operator v26.4.1 crds/mellanox.com_nicclusterpolicies.yaml: status.state enum.
NIC_CLUSTER_POLICY: Final = CrKind(
    "mellanox.com", "v1alpha1", "NicClusterPolicy", "nicclusterpolicies", ("ready", "notReady", "ignore", "error")
)
#: gpu-operator v26.7.0 crds/nvidia.com_clusterpolicies.yaml: status.state enum ignored, ready, notReady.
CLUSTER_POLICY: Final = CrKind("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies", ("ready", "notReady", "ignored"))
#: The metric's name in the configuration; kube-state-metrics prefixes ``kube_customresource_``.
METRIC_NAME: Final = "gpuaas_status_state"
STATE_METRIC: Final = f"kube_customresource_{METRIC_NAME}"


def custom_resource_state() -> dict[str, Any]:
    """The ``CustomResourceStateMetrics`` document: ``status.state`` of both kinds, by object name."""
    resources = [
        {
            "groupVersionKind": {"group": k.group, "version": k.version, "kind": k.kind},
            "labelsFromPath": {"name": ["metadata", "name"]},
            "metrics": [
                {
                    "name": METRIC_NAME,
                    "help": f"status.state of the {k.kind} (1 for the current state)",
                    "each": {
                        "type": "StateSet",
                        "stateSet": {"labelName": "state", "path": ["status", "state"], "list": list(k.states)},
                    },
                }
            ],
        }
        for k in (NIC_CLUSTER_POLICY, CLUSTER_POLICY)
    ]
    return {"kind": "CustomResourceStateMetrics", "spec": {"resources": resources}}


def kube_state_metrics_values() -> dict[str, Any]:
    """What to merge into the kube-state-metrics chart's values (kube-prometheus-stack: under
    ``kube-state-metrics:``): the configuration, and ``list``/``watch`` on the two kinds."""
    rules = [
        {"apiGroups": [k.group], "resources": [k.plural], "verbs": ["list", "watch"]}
        for k in (NIC_CLUSTER_POLICY, CLUSTER_POLICY)
    ]
    return {
        "customResourceState": {"enabled": True, "config": custom_resource_state()},
        "rbac": {"extraRules": rules},
    }
