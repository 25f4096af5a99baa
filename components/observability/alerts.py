"""The alerts: idle GPUs, GPU faults by who must act, the exporters' absence, proofs, queues and the fabric.

Each alert carries ``runbook_url`` (:func:`components.observability.promql.runbook_url`), its page
``docs/runbooks/<alert>.md`` under ``gpuaas:observability.runbookBaseUrl``. GPU faults read the
per-device series of :mod:`components.observability.dcgm` (robust to the pod label moving and to
dcgm-exporter's renames) and name the pods that held the GPU (:func:`~components.observability.dcgm.held_by`).

The fabric alerts read kube-state-metrics: DaemonSets and the in-cluster OpenSM Deployment from its
built-in metrics; the NicClusterPolicy's and the ClusterPolicy's ``status.state`` from its
custom-resource-state metrics (:mod:`components.observability.operator_state`), which the Prometheus
stack's kube-state-metrics must be configured for: without that, ``GpuaasOperatorStateMetricsAbsent``
says so instead of the readiness alerts staying silent.
"""

from __future__ import annotations

from typing import Final

from components.model.config import StackConfig
from components.model.dra import uses_dra
from components.observability import dcgm as d
from components.observability import xid
from components.observability.operator_state import CLUSTER_POLICY, NIC_CLUSTER_POLICY, STATE_METRIC
from components.observability.promql import NOT_FOLLOWER, Alert, Group, with_team
from components.observability.rules import CQ_LENDABLE, DEVICE_UTIL_5M, NODE_GPUS, PROOF_JOBS, TEAM_INFO

#: An XID alert stays this long after the XID appeared, then resolves: dcgm-exporter holds the last
#: XID until the driver or the exporter restarts (NVIDIA/DCGM#277, NVIDIA/dcgm-exporter#500, #190),
#: so the value itself never clears.
XID_HOLD: Final = "1h"
#: The fabric's node agents in the Network Operator's namespace: gpuaas's own (components/fabric:
#: sriov_host DAEMONSET, ib_node_config, multus_kubeconfig NAME; operators/nic_cluster_policy
#: IB_SRIOV_CNI; operators/rdma_shared_device_plugin standalone) and the operator's, rendered from
#: the NicClusterPolicy (network-operator v26.4.1 manifests/state-sriov-device-plugin and
#: state-rdma-shared-device-plugin: no name suffix for a NicClusterPolicy, pkg/state/state_skel.go).
#: tests/observability checks every DaemonSet the plans hold there is listed.
FABRIC_DAEMONSETS: Final = (
    "network-operator-sriov-device-plugin",
    "rdma-shared-dp-ds",
    "gpuaas-vf-config",
    "ib-node-config",
    "ib-sriov-cni",
    "gpuaas-multus-kubeconfig",
)
#: components/fabric/opensm.py DEPLOYMENT.
OPENSM_DEPLOYMENT: Final = "gpuaas-opensm"


def _xid_events(op: str, regex: str) -> str:
    """XIDs whose label matches (``=~``) or not (``!~``) ``regex``, for :data:`XID_HOLD` after each appeared."""
    return f'max_over_time({d.XID_EVENT}{{xid{op}"{regex}"}}[{XID_HOLD}])'


def _gpu_alerts(cfg: StackConfig) -> list[Alert]:
    o = cfg.observability
    app, reset = xid.alternation(xid.APPLICATION), xid.alternation(xid.NEEDS_RESET)
    where = "{{ $labels.node }} GPU {{ $labels.gpu }}"
    return [
        Alert(
            "GpuaasGpuAllocatedIdle",
            f"{DEVICE_UTIL_5M} < {o.idle.threshold_percent / 100!r}",
            o.idle.window,
            "warning",
            "GPU allocated to {{ $labels.namespace }}/{{ $labels.pod }} is idle",
            f"Team {{{{ $labels.team }}}}: under {o.idle.threshold_percent:g} % for {o.idle.window} on "
            "{{ $labels.node }} GPU {{ $labels.gpu }}.",
        ),
        Alert(
            "GpuaasGpuXidApplicationError",
            with_team(_xid_events("=~", app), TEAM_INFO),
            "0s",
            "warning",
            f"XID {{{{ $labels.xid }}}} from {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} on {where}",
            "NVIDIA's XID catalog gives this XID as the application's (restart it; the GPU is fine). "
            f"Clears {XID_HOLD} after the XID.",
        ),
        Alert(
            "GpuaasGpuXidHardwareError",
            with_team(_xid_events("=~", reset), TEAM_INFO),
            "0s",
            "critical",
            f"XID {{{{ $labels.xid }}}} on {where}: the GPU needs a reset",
            f"NVIDIA's XID catalog: reset the GPU or reboot the node; drain it first. Clears {XID_HOLD} after the XID.",
        ),
        Alert(
            "GpuaasGpuXidError",
            with_team(_xid_events("!~", f"{app}|{reset}"), TEAM_INFO),
            "0s",
            "warning",
            f"XID {{{{ $labels.xid }}}} on {where}",
            f"An XID gpuaas does not classify: read it in NVIDIA's XID catalog. Clears {XID_HOLD} after the XID.",
        ),
        Alert(
            "GpuaasGpuEccDoubleBitErrors",
            with_team(d.held_by(f"increase({d.ECC_DBE}[10m]) > 0", "10m"), TEAM_INFO),
            "0s",
            "critical",
            f"Uncorrectable ECC errors on {where}",
            "Double-bit volatile ECC errors in the last 10 minutes: drain the node and reset the GPU.",
        ),
        Alert(
            "GpuaasGpuRetiredPages",
            with_team(
                d.held_by(
                    f"max by ({d.DEVICE}) ({d.RETIRED_PENDING} > 0 or increase({d.RETIRED_DBE}[1h]) > 0 "
                    f"or {d.REMAP_FAILED} > 0)",
                    "1h",
                ),
                TEAM_INFO,
            ),
            "0s",
            "critical",
            f"Memory pages retired or pending retirement on {where}",
            "Pages retired for double-bit errors, pending retirement (reset the GPU) or a failed row remap.",
        ),
        Alert(
            "GpuaasGpuRowRemapPending",
            # Row remapping exists from Ampere on; older GPUs report no such field, so no series.
            with_team(d.held_by(f"{d.REMAP_PENDING} > 0", "5m"), TEAM_INFO),
            "0s",
            "warning",
            f"A row remap on {where} waits for a GPU reset",
            "An uncorrectable memory error was repaired by a row remap that is active only after a GPU "
            "reset: drain the node and reset the GPU.",
        ),
        Alert(
            "GpuaasNodeMissingFromExporter",
            f"{NODE_GPUS} unless on (node) group by (node) ({d.GPU_TEMP})",
            "10m",
            "warning",
            "dcgm-exporter reports no GPU of node {{ $labels.node }}",
            "The node is in the cluster; its dcgm-exporter pod is down or the driver is not loaded.",
        ),
        Alert(
            "GpuaasGpuMissingFromExporter",
            f"count by (node) (group by (node, gpu) ({d.GPU_TEMP})) < on (node) group_left (node_group) {NODE_GPUS}",
            "10m",
            "warning",
            "Node {{ $labels.node }} reports only {{ $value }} GPUs",
            "Fewer GPUs than node group {{ $labels.node_group }} has per node: one fell off the bus (XID 79).",
        ),
    ]


def _platform_alerts(cfg: StackConfig) -> list[Alert]:
    o = cfg.observability
    out = [
        Alert(
            "GpuaasProofJobFailed",
            with_team(f'kube_job_failed{{condition="true", job_name=~"{PROOF_JOBS}"}} == 1', TEAM_INFO),
            "0s",
            "warning",
            "Proof Job {{ $labels.namespace }}/{{ $labels.job_name }} failed",
            "A verification or burn-in Job failed: read it with workloads/gather_results.py.",
        ),
        Alert(
            "GpuaasKubeStateMetricsAbsent",
            "absent(kube_pod_info)",
            "15m",
            "warning",
            "kube-state-metrics series are absent",
            "Allocation per team is computed from kube-state-metrics; Prometheus scrapes none.",
        ),
    ]
    if cfg.queues.elastic:
        pending = f'sum by (cluster_queue, resource) (kueue_cluster_queue_resource_pending{{{NOT_FOLLOWER}, resource=~"nvidia.com/.+"}}) > 0'  # noqa: E501
        cohorts = f"group by (cluster_queue, cohort) (kueue_cluster_queue_nominal_quota{{{NOT_FOLLOWER}}})"
        idle = f"sum by (cohort, resource) ({CQ_LENDABLE}) > 0"
        out += [
            Alert(
                "GpuaasQueueStarving",
                f"(({pending}) * on (cluster_queue) group_left (cohort) {cohorts} and on (cohort, resource) ({idle}))"
                f" * on (cluster_queue) group_left (team) {TEAM_INFO}",
                o.starvation_window,
                "warning",
                "Team {{ $labels.team }} waits for {{ $labels.resource }} while its cohort has idle quota",
                "{{ $value }} pending in cohort {{ $labels.cohort }}: a borrowing limit, a flavor the workload "
                "cannot use, or idle quota too fragmented for its size.",
            ),
            Alert(
                "GpuaasKueueMetricsAbsent",
                "absent(kueue_cluster_queue_nominal_quota)",
                "15m",
                "warning",
                "Kueue's ClusterQueue metrics are absent",
                "Borrowing and lending are computed from Kueue's metrics: its ServiceMonitor is not scraped "
                "(token, TLS or selector) or enableClusterQueueResources is off.",
            ),
        ]
    return out


def operator_kinds(cfg: StackConfig) -> tuple[str, ...]:
    """The operator CRs whose readiness is alerted: the NicClusterPolicy always, the ClusterPolicy
    unless the DRA model replaces it with a GPUCluster (no ClusterPolicy then)."""
    return (NIC_CLUSTER_POLICY.kind,) if uses_dra(cfg) else (NIC_CLUSTER_POLICY.kind, CLUSTER_POLICY.kind)


def _fabric_alerts(cfg: StackConfig) -> list[Alert]:
    ns = cfg.network.namespace
    daemonsets = "|".join(FABRIC_DAEMONSETS)
    sel = f'namespace="{ns}", daemonset=~"{daemonsets}"'
    kinds = "|".join(operator_kinds(cfg))
    out = [
        Alert(
            "GpuaasOperatorNotReady",
            f"max by (customresource_kind, name) "
            f'({STATE_METRIC}{{customresource_kind=~"{kinds}", state="ready"}}) == 0',
            "15m",
            "critical",
            "{{ $labels.customresource_kind }} {{ $labels.name }} is not ready",
            "The operator has not reached status.state=ready for 15 minutes: its operands (drivers, device "
            "plugins, CNI) are not all running, and new GPU or RDMA pods may not start.",
        ),
        Alert(
            "GpuaasOperatorStateMetricsAbsent",
            f'absent({STATE_METRIC}{{customresource_kind="{NIC_CLUSTER_POLICY.kind}"}})',
            "1h",
            "warning",
            "kube-state-metrics reports no NicClusterPolicy or ClusterPolicy state",
            "Operator readiness is read from kube-state-metrics' custom-resource-state metrics; its "
            "configuration lacks gpuaas's resources (docs/notes/alerts.md), so GpuaasOperatorNotReady cannot fire.",
        ),
        Alert(
            "GpuaasFabricDaemonSetUnavailable",
            f"kube_daemonset_status_desired_number_scheduled{{{sel}}} - kube_daemonset_status_number_available{{{sel}}}"
            " > 0",
            "15m",
            "critical",
            "{{ $value }} pods of DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }} are unavailable",
            "A fabric node agent (device plugin, VF configuration, IB node configuration, CNI) is not running "
            "on every node it should: pods there get no RDMA devices or networks.",
        ),
    ]
    onprem = cfg.onprem
    if onprem is not None and onprem.fabric.opensm.deploy_in_cluster:
        dep = f'kube_deployment_status_replicas_available{{namespace="{ns}", deployment="{OPENSM_DEPLOYMENT}"}}'
        out.append(
            Alert(
                "GpuaasOpenSmNotRunning",
                f"({dep} < 1) or absent({dep})",
                "5m",
                "critical",
                f"The in-cluster subnet manager {ns}/{OPENSM_DEPLOYMENT} is not running",
                "Without a subnet manager the InfiniBand fabric gets no new partitions or routes, and ports "
                "that come up stay down.",
            )
        )
    return out


def alerts(cfg: StackConfig) -> Group:
    out = [*_gpu_alerts(cfg), *_platform_alerts(cfg), *_fabric_alerts(cfg)]
    return Group("gpuaas-alerts", cfg.observability.evaluation_interval, tuple(out))
