"""promtool cases for the alerts on GPU faults and the fabric (issue 35, items 1-5).

Each case is written from what a real fleet shows, the expected alerts by hand: the counter that
jumps to a new series when the pod it killed ends, an XID that a later pod inherits, a row remap
waiting for a reset, a fabric DaemonSet short of a pod, an operator not ready, OpenSM gone, and
dcgm-exporter 4.9.0's names. tests/e2e/test_rules_hold_on_synthetic_series.py runs them with the
rest of the rule tests in one promtool run.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.rule_cases import NODES, ROUTING, alert_test, case_group, dcgm, expr_tests

#: Minutes of every case here.
SPAN = 140


def at(metric: str, node: str, gpu: int, values: str, **labels: str) -> dict[str, str]:
    """A DCGM series of ``node``'s GPU ``gpu`` with explicit promtool values."""
    extra = "".join(f', {k}="{v}"' for k, v in labels.items())
    return {
        "series": f'{metric}{{node="{node}", gpu="{gpu}", UUID="GPU-{node}-{gpu}", modelName="H100"{extra}}}',
        "values": values,
    }


def gpu_labels(node: str, gpu: int, severity: str, **extra: str) -> dict[str, str]:
    return {**ROUTING, "severity": severity, "node": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", **extra}


ECC_ALERT = {
    "summary": "Uncorrectable ECC errors on gpu-node-01 GPU 0",
    "description": "Double-bit volatile ECC errors in the last 10 minutes: drain the node and reset the GPU.",
}
VISION_POD = {"namespace": "vision", "pod": "train-0", "team": "vision"}


def ecc_cases() -> list[dict[str, Any]]:
    """Item 1. A double-bit error ends vision's pod: up to minute 20 the counter (0) and the GPU carry
    the pod; from 21 dcgm-exporter reports them without it, the counter at 1. Per series that is 0
    then a new series starting at 1 (``increase`` 0: the old rule missed it); per device it is 0 → 1."""
    holder = {"namespace": "vision", "pod": "train-0"}
    pod_ends = [
        *NODES,
        dcgm("DCGM_FI_DEV_GPU_TEMP", "gpu-node-01", 0, 40, 0, 20, **holder),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "gpu-node-01", 0, 40, 21, SPAN),
        dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu-node-01", 0, 0, 0, 20, **holder),
        dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu-node-01", 0, 1, 21, SPAN),
    ]
    fired = [{"labels": gpu_labels("gpu-node-01", 0, "critical", **VISION_POD), "annotations": ECC_ALERT}]
    # The steady case: the pod survives, the same series goes 0 → 1 at minute 21.
    steady = [
        *NODES,
        dcgm("DCGM_FI_DEV_GPU_TEMP", "gpu-node-01", 0, 40, 0, SPAN, **holder),
        at("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu-node-01", 0, "0x20 1x119", **holder),
    ]
    # The twin: no error, no alert.
    clean = [*NODES, at("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu-node-01", 0, "0x140", **holder)]
    return [
        case_group(
            "ECC: the error that ends the pod is counted on the device",
            pod_ends,
            [],
            [
                alert_test("GpuaasGpuEccDoubleBitErrors", 15, []),
                alert_test("GpuaasGpuEccDoubleBitErrors", 25, fired),
                alert_test("GpuaasGpuEccDoubleBitErrors", 40, []),  # 10 minutes later: resolved
            ],
        ),
        case_group(
            "ECC: the error on a pod that lives on",
            steady,
            [],
            [alert_test("GpuaasGpuEccDoubleBitErrors", 25, fired), alert_test("GpuaasGpuEccDoubleBitErrors", 40, [])],
        ),
        case_group("ECC: no error", clean, [], [alert_test("GpuaasGpuEccDoubleBitErrors", 25, [])]),
    ]


def xid_cases() -> list[dict[str, Any]]:
    """Item 2. gpu-node-05 GPU 3: vision's train-0 gets XID 31 at minute 10 and ends at 29; from 30
    language's lm-0 holds the GPU, the exporter still reporting 31 (the last XID) on it. The alert
    names vision's pod, never language's, and clears one hour after minute 10.
    gpu-node-06 GPU 5: XID 79 at minute 5 under dcgm-exporter 4.9.0's name, no pod; GPU 6: XID 61
    (not classified) at minute 5."""
    vision = {"namespace": "vision", "pod": "train-0"}
    language = {"namespace": "language", "pod": "lm-0"}
    series = [
        *NODES,
        dcgm("DCGM_FI_DEV_GPU_TEMP", "gpu-node-05", 3, 40, 0, 29, **vision),
        at("DCGM_FI_DEV_XID_ERRORS", "gpu-node-05", 3, "0x9 31x19 stale", **vision),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "gpu-node-05", 3, 40, 30, SPAN, **language),
        dcgm("DCGM_FI_DEV_XID_ERRORS", "gpu-node-05", 3, 31, 30, SPAN, **language),
        at("DCGM_FI_DEV_XID_ERROR", "gpu-node-06", 5, f"0x4 79x{SPAN - 5}"),
        at("DCGM_FI_DEV_XID_ERRORS", "gpu-node-06", 6, f"0x4 61x{SPAN - 5}"),
        # A GPU whose exporter starts with an old XID: no change seen, no alert.
        at("DCGM_FI_DEV_XID_ERRORS", "gpu-node-06", 7, f"43x{SPAN}"),
    ]
    app = {
        "labels": gpu_labels("gpu-node-05", 3, "warning", xid="31", team="vision", **vision),
        "annotations": {
            "summary": "XID 31 from vision/train-0 on gpu-node-05 GPU 3",
            "description": "NVIDIA's XID catalog gives this XID as the application's (restart it; the GPU "
            "is fine). Clears 1h after the XID.",
        },
    }
    reset = {
        "labels": gpu_labels("gpu-node-06", 5, "critical", xid="79"),
        "annotations": {
            "summary": "XID 79 on gpu-node-06 GPU 5: the GPU needs a reset",
            "description": "NVIDIA's XID catalog: reset the GPU or reboot the node; drain it first. "
            "Clears 1h after the XID.",
        },
    }
    other = {
        "labels": gpu_labels("gpu-node-06", 6, "warning", xid="61"),
        "annotations": {
            "summary": "XID 61 on gpu-node-06 GPU 6",
            "description": "An XID gpuaas does not classify: read it in NVIDIA's XID catalog. Clears 1h after the XID.",
        },
    }
    return [
        case_group(
            "XIDs: on a change, to the pod that held the GPU then, cleared after an hour",
            series,
            [],
            [
                alert_test("GpuaasGpuXidApplicationError", 8, []),
                alert_test("GpuaasGpuXidApplicationError", 15, [app]),
                alert_test("GpuaasGpuXidApplicationError", 45, [app]),  # language holds it now: still vision's
                alert_test("GpuaasGpuXidApplicationError", 68, [app]),
                alert_test("GpuaasGpuXidApplicationError", 75, []),  # resolved, though the value is still 31
                alert_test("GpuaasGpuXidHardwareError", 10, [reset]),
                alert_test("GpuaasGpuXidHardwareError", 70, []),
                alert_test("GpuaasGpuXidError", 10, [other]),
            ],
        )
    ]


def row_remap_cases() -> list[dict[str, Any]]:
    """Item 3. gpu-node-06 GPU 4 has a remap pending from minute 10 until a reset at 60; GPU 7 none.
    GPU 4 has 2 rows remapped for uncorrectable errors (old name), GPU 7 one (4.9.0's name)."""
    series = [
        *NODES,
        at("DCGM_FI_DEV_ROW_REMAP_PENDING", "gpu-node-06", 4, "0x9 1x50 0x80"),
        at("DCGM_FI_DEV_ROW_REMAP_PENDING", "gpu-node-06", 7, f"0x{SPAN}"),
        at("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "gpu-node-06", 4, f"2x{SPAN}", namespace="vision", pod="x"),
        at("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", "gpu-node-06", 7, f"1x{SPAN}"),
    ]
    remapped = (
        "gpuaas:gpu_device:row_remap_uncorrectable_total",
        15,
        [
            ('{node="gpu-node-06", gpu="4", UUID="GPU-gpu-node-06-4"}', 2),
            ('{node="gpu-node-06", gpu="7", UUID="GPU-gpu-node-06-7"}', 1),
        ],
    )
    pending = {
        "labels": gpu_labels("gpu-node-06", 4, "warning"),
        "annotations": {
            "summary": "A row remap on gpu-node-06 GPU 4 waits for a GPU reset",
            "description": "An uncorrectable memory error was repaired by a row remap that is active only after "
            "a GPU reset: drain the node and reset the GPU.",
        },
    }
    return [
        case_group(
            "a row remap waiting for a reset",
            series,
            expr_tests([remapped]),
            [
                alert_test("GpuaasGpuRowRemapPending", 5, []),
                alert_test("GpuaasGpuRowRemapPending", 15, [pending]),
                alert_test("GpuaasGpuRowRemapPending", 70, []),
            ],
        )
    ]


NS = "nvidia-network-operator"


def ksm_cr(kind: str, group: str, version: str, name: str, state: str, values: str) -> dict[str, str]:
    return {
        "series": f'kube_customresource_gpuaas_status_state{{customresource_group="{group}", '
        f'customresource_kind="{kind}", customresource_version="{version}", name="{name}", state="{state}"}}',
        "values": values,
    }


def daemonset(name: str, desired: int, available: int, namespace: str = NS) -> list[dict[str, str]]:
    sel = f'namespace="{namespace}", daemonset="{name}"'
    return [
        {"series": f"kube_daemonset_status_desired_number_scheduled{{{sel}}}", "values": f"{desired}x{SPAN}"},
        {"series": f"kube_daemonset_status_number_available{{{sel}}}", "values": f"{available}x{SPAN}"},
    ]


def fabric_cases() -> list[dict[str, Any]]:
    """Item 4. ib-node-config runs on 5 of 6 nodes; gpuaas-vf-config on all; kube-proxy (not the
    fabric's) misses one. The NicClusterPolicy is notReady, the ClusterPolicy ready. OpenSM's one
    replica goes at minute 10."""
    series = [
        *daemonset("ib-node-config", 6, 5),
        *daemonset("gpuaas-vf-config", 6, 6),
        *daemonset("kube-proxy", 6, 5, namespace="kube-system"),
        ksm_cr("NicClusterPolicy", "mellanox.com", "v1alpha1", "nic-cluster-policy", "ready", f"0x{SPAN}"),
        ksm_cr("NicClusterPolicy", "mellanox.com", "v1alpha1", "nic-cluster-policy", "notReady", f"1x{SPAN}"),
        ksm_cr("ClusterPolicy", "nvidia.com", "v1", "cluster-policy", "ready", f"1x{SPAN}"),
        {
            "series": f'kube_deployment_status_replicas_available{{namespace="{NS}", deployment="gpuaas-opensm"}}',
            "values": f"1x9 0x{SPAN - 10}",
        },
    ]
    ds = {
        "labels": {**ROUTING, "severity": "critical", "namespace": NS, "daemonset": "ib-node-config"},
        "annotations": {
            "summary": f"1 pods of DaemonSet {NS}/ib-node-config are unavailable",
            "description": "A fabric node agent (device plugin, VF configuration, IB node configuration, CNI) is "
            "not running on every node it should: pods there get no RDMA devices or networks.",
        },
    }
    operator = {
        "labels": {
            **ROUTING,
            "severity": "critical",
            "customresource_kind": "NicClusterPolicy",
            "name": "nic-cluster-policy",
        },
        "annotations": {
            "summary": "NicClusterPolicy nic-cluster-policy is not ready",
            "description": "The operator has not reached status.state=ready for 15 minutes: its operands "
            "(drivers, device plugins, CNI) are not all running, and new GPU or RDMA pods may not start.",
        },
    }
    sm = {
        "labels": {**ROUTING, "severity": "critical", "namespace": NS, "deployment": "gpuaas-opensm"},
        "annotations": {
            "summary": f"The in-cluster subnet manager {NS}/gpuaas-opensm is not running",
            "description": "Without a subnet manager the InfiniBand fabric gets no new partitions or routes, and "
            "ports that come up stay down.",
        },
    }
    # The twins: everything available and ready, OpenSM up.
    healthy = [
        *daemonset("ib-node-config", 6, 6),
        ksm_cr("NicClusterPolicy", "mellanox.com", "v1alpha1", "nic-cluster-policy", "ready", f"1x{SPAN}"),
        {
            "series": f'kube_deployment_status_replicas_available{{namespace="{NS}", deployment="gpuaas-opensm"}}',
            "values": f"1x{SPAN}",
        },
    ]
    absent_state = {
        "labels": {**ROUTING, "severity": "warning", "customresource_kind": "NicClusterPolicy"},
        "annotations": {
            "summary": "kube-state-metrics reports no NicClusterPolicy or ClusterPolicy state",
            "description": "Operator readiness is read from kube-state-metrics' custom-resource-state metrics; "
            "its configuration lacks gpuaas's resources (docs/notes/alerts.md), so GpuaasOperatorNotReady cannot "
            "fire.",
        },
    }
    return [
        case_group(
            "the fabric degraded",
            series,
            [],
            [
                alert_test("GpuaasFabricDaemonSetUnavailable", 10, []),  # for 15m
                alert_test("GpuaasFabricDaemonSetUnavailable", 20, [ds]),
                alert_test("GpuaasOperatorNotReady", 20, [operator]),
                alert_test("GpuaasOperatorStateMetricsAbsent", 70, []),
                alert_test("GpuaasOpenSmNotRunning", 12, []),  # for 5m
                alert_test("GpuaasOpenSmNotRunning", 20, [sm]),
            ],
        ),
        case_group(
            "the fabric healthy",
            healthy,
            [],
            [
                alert_test("GpuaasFabricDaemonSetUnavailable", 30, []),
                alert_test("GpuaasOperatorNotReady", 30, []),
                alert_test("GpuaasOpenSmNotRunning", 30, []),
            ],
        ),
        # kube-state-metrics without gpuaas's custom-resource-state config, and no OpenSM Deployment.
        case_group(
            "no operator state, no OpenSM",
            [*daemonset("ib-node-config", 6, 6)],
            [],
            [
                alert_test("GpuaasOperatorStateMetricsAbsent", 50, []),  # for 1h
                alert_test("GpuaasOperatorStateMetricsAbsent", 70, [absent_state]),
                alert_test("GpuaasOpenSmNotRunning", 10, [sm]),  # absent(): the same labels
            ],
        ),
    ]


#: dcgm-exporter 4.9.0: name → (new name, what a value of the old name is in the new unit).
NEW_NAMES = {
    "DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL_RATIO", lambda v: v / 100),
    "DCGM_FI_DEV_FB_USED": ("DCGM_FI_DEV_FB_USED_BYTES", lambda v: v * 1048576),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", lambda v: v),
}


def renamed(series: list[dict[str, str]], node: str | None = None) -> list[dict[str, str]]:
    """``series`` as dcgm-exporter 4.9.0 reports them (on ``node`` only, or everywhere): new names,
    new units, and the driver version label under its new name."""
    out = []
    for s in series:
        metric = s["series"].split("{", 1)[0]
        if metric not in NEW_NAMES or (node is not None and f'node="{node}"' not in s["series"]):
            out.append(s)
            continue
        new, convert = NEW_NAMES[metric]
        values = " ".join(v if v in ("_", "stale") else repr(convert(float(v))) for v in s["values"].split())
        labels = s["series"].split("{", 1)[1].rstrip("}")
        out.append({"series": f'{new}{{{labels}, DCGM_FI_SYSTEM_DRIVER_VERSION="580.95.05"}}', "values": values})
    return out


def fault_groups() -> list[dict[str, Any]]:
    return [*ecc_cases(), *xid_cases(), *row_remap_cases(), *fabric_cases()]
