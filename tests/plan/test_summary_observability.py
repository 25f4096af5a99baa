"""The plan summary's monitoring lines: what is monitored and alerted, as a reviewer reads it.

The expected lines are written by hand from the stack's numbers set here (namespaces, labels,
windows, interval, prices, weights); the two counts the summary reports (recorded series, DCGM
fields) are checked against what the offline plan actually sends (the PrometheusRule objects, the
GPU Operator release's counters file), not against the functions the summary calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.loader import parse_config
from components.plan.summary import observability_lines
from components.plan.writer import HELM_RELEASE, main
from tests.conftest import fixture_config, offline_run, raw_stack, stack_path

#: The alerts with their fixed ``for`` (not from config): XIDs, ECC, retired pages and a pending row
#: remap fire at once, missing exporter series after 10m, absent kube-state-metrics / Kueue metrics
#: and operators not ready after 15m, fabric DaemonSets short of pods after 15m.
FIXED_ALERTS = {
    "GpuaasGpuXidApplicationError": ("0s", "warning"),
    "GpuaasGpuXidHardwareError": ("0s", "critical"),
    "GpuaasGpuXidError": ("0s", "warning"),
    "GpuaasGpuEccDoubleBitErrors": ("0s", "critical"),
    "GpuaasGpuRetiredPages": ("0s", "critical"),
    "GpuaasGpuRowRemapPending": ("0s", "warning"),
    "GpuaasNodeMissingFromExporter": ("10m", "warning"),
    "GpuaasGpuMissingFromExporter": ("10m", "warning"),
    "GpuaasProofJobFailed": ("0s", "warning"),
    "GpuaasKubeStateMetricsAbsent": ("15m", "warning"),
    "GpuaasOperatorNotReady": ("15m", "critical"),
    "GpuaasOperatorStateMetricsAbsent": ("1h", "warning"),
    "GpuaasFabricDaemonSetUnavailable": ("15m", "critical"),
}


def recorded_series_in_plan() -> int:
    """Distinct ``record:`` names in the PrometheusRule objects of the onprem plan."""
    run = offline_run("onprem")
    names = {
        rule["record"]
        for r in run.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
        for group in r.inputs["spec"]["groups"]
        for rule in group["rules"]
        if "record" in rule
    }
    assert names, "the onprem plan has PrometheusRules with recording rules"
    return len(names)


def dcgm_fields_in_plan() -> int:
    """Field lines of the counters file the GPU Operator release gives dcgm-exporter (onprem plan)."""
    (release,) = [r for r in offline_run("onprem").of_type(HELM_RELEASE) if r.inputs["name"] == "gpu-operator"]
    csv = release.inputs["values"]["dcgmExporter"]["config"]["data"]
    return len([line for line in csv.splitlines() if line.strip() and not line.startswith("#")])


def onprem_edited() -> dict[str, Any]:
    raw = raw_stack("onprem")
    raw["observability"] = {
        "enabled": True,
        "prometheus": {
            "namespace": "prom",
            "monitorLabels": {"tier": "platform", "prometheus": "gpu"},
            "ruleLabels": {"role": "alert-rules"},
        },
        "idle": {"thresholdPercent": 3, "window": "2h"},
        "starvationWindow": "45m",
        "evaluationInterval": "30s",
        "grafana": {"namespace": "grafana"},
        "migWeights": {"4g.40gb": 0.5},
        "prices": {"currency": "EUR", "gpuModels": {"H100-80GB": 3.5}, "migProfiles": {"1g.10gb": 0.5}},
    }
    return raw


def test_the_summary_lists_what_is_monitored_and_alerted_from_the_stacks_numbers() -> None:
    series, fields = recorded_series_in_plan(), dcgm_fields_in_plan()
    lines = observability_lines(parse_config(onprem_edited()))
    assert lines == [
        "Monitoring: plugs into the Prometheus stack in 'prom' (monitors labelled prometheus=gpu, tier=platform, "
        "rules labelled role=alert-rules); needs its prometheus-operator CRDs (else pulumi up stops before any "
        "monitor) and kube-state-metrics",
        f"  dcgm-exporter: GPU Operator ServiceMonitor, pod attribution, {fields} DCGM fields "
        "(ECC and retired pages on)",
        "  Kueue: ServiceMonitor over HTTPS with its own ServiceAccount token (ClusterQueue resources on)",
        f"  {series} recorded series, every 30s; dashboards: platform, team (ConfigMaps in 'grafana')",
        "alert                             for  severity",
        "--------------------------------  ---  --------",
        "GpuaasGpuAllocatedIdle            2h   warning",  # idle.window
        "GpuaasGpuXidApplicationError      0s   warning",
        "GpuaasGpuXidHardwareError         0s   critical",
        "GpuaasGpuXidError                 0s   warning",
        "GpuaasGpuEccDoubleBitErrors       0s   critical",
        "GpuaasGpuRetiredPages             0s   critical",
        "GpuaasGpuRowRemapPending          0s   warning",
        "GpuaasNodeMissingFromExporter     10m  warning",
        "GpuaasGpuMissingFromExporter      10m  warning",
        "GpuaasProofJobFailed              0s   warning",
        "GpuaasKubeStateMetricsAbsent      15m  warning",
        "GpuaasQueueStarving               45m  warning",  # starvationWindow
        "GpuaasKueueMetricsAbsent          15m  warning",
        "GpuaasOperatorNotReady            15m  critical",
        "GpuaasOperatorStateMetricsAbsent  1h   warning",
        "GpuaasFabricDaemonSetUnavailable  15m  critical",
        # h100-mig: 1g.10gb is 1 of the H100's 7 compute slices (1/7 = 0.1429) at its own price 0.5;
        # 4g.40gb weighs the configured 0.5 and costs 0.5 x 3.5 = 1.75. h100-shared: 2 replicas, so
        # a share is 1/2 of a GPU, 1.75. h100-full: one GPU, 3.5.
        "node group   gpu kind                GPU-equivalents  price/h (EUR)",
        "-----------  ----------------------  ---------------  -------------",
        "h100-mig     nvidia.com/mig-1g.10gb  0.1429           0.5",
        "h100-mig     nvidia.com/mig-4g.40gb  0.5              1.75",
        "h100-shared  nvidia.com/gpu.shared   0.5              1.75",
        "h100-full    nvidia.com/gpu          1                3.5",
        "",
    ]
    assert fields == 21, (
        "DCGM_COUNTERS: 17 device fields (ECC, retired pages, row remap pending), 3 profiling, the driver"
    )


def test_without_elastic_queues_or_prices_the_summary_says_so() -> None:
    """The AKS stack (no elastic queues): no Kueue scrape, no Kueue alerts; one selector for both
    kinds; and a node group left unpriced shows ``-``."""
    raw = raw_stack("aks")
    raw["observability"]["prices"] = {"currency": "USD", "gpuModels": {}}
    lines = observability_lines(parse_config(raw))
    assert lines[0].startswith(
        "Monitoring: plugs into the Prometheus stack in 'monitoring' (monitors and rules labelled "
        "release=kube-prometheus-stack); "
    )
    assert not any("Kueue" in line for line in lines), lines
    alerts = {line.split()[0]: tuple(line.split()[1:]) for line in lines if line.startswith("Gpuaas")}
    assert alerts == {"GpuaasGpuAllocatedIdle": ("1h", "warning"), **FIXED_ALERTS}
    assert lines[-4:] == [
        "----------  --------------  ---------------  -------------",
        "ndh100a     nvidia.com/gpu  1                -",
        "ndh100b     nvidia.com/gpu  1                -",
        "",
    ]


def test_the_written_summary_carries_the_monitoring_lines_only_when_enabled(tmp_path: Path) -> None:
    assert main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(tmp_path / "on"), "--quiet"]) == 0
    text = (tmp_path / "on" / "onprem" / "summary.txt").read_text()
    assert "\nMonitoring: plugs into the Prometheus stack in 'monitoring' (monitors and rules labelled " in text
    assert "\nGpuaasGpuAllocatedIdle            1h   warning\n" in text
    # observability.enabled: false: nothing is monitored, and the summary says nothing of it.
    config = fixture_config("onprem")
    config["gpuaas:observability"] = {"enabled": False}
    stack_file = tmp_path / "Pulumi.onprem.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    assert main(["onprem", "--stack-file", str(stack_file), "--out", str(tmp_path / "off"), "--quiet"]) == 0
    text = (tmp_path / "off" / "onprem" / "summary.txt").read_text()
    assert "Monitoring:" not in text and "Gpuaas" not in text
