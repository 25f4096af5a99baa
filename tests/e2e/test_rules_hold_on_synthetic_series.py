"""The PrometheusRules, run by the real promtool on synthetic series: every recording rule and alert.

``promtool check rules`` on both stacks' rule files, then ``promtool test rules`` with a synthetic
day on the onprem fleet (h100-full: whole GPUs; h100-mig: 1x4g.40gb-3x1g.10gb; h100-shared:
time-slicing, 2 replicas). Every expected value below is computed by hand in its comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.loader import parse_config
from components.model.config import StackConfig
from components.observability.dcgm import dcgm_group
from components.observability.groups import rule_file
from components.observability.promql import Recording
from tests.conftest import STACKS, raw_stack
from tests.e2e.fault_cases import fault_groups, renamed
from tests.e2e.prometheus import promtool
from tests.e2e.rule_cases import DAY, NODES, ROUTING, alert_test, always, case_group, dcgm, expr_tests, pod

OBSERVABILITY = {
    "enabled": True,
    "idle": {"thresholdPercent": 5, "window": "1h"},
    "starvationWindow": "30m",
    "evaluationInterval": "1m",
    "alertLabels": {"routing": "gpu-platform"},
    # Configured weights (binary fractions, so the hand figures are exact): 1g = 1/8, 4g = 1/2.
    "migWeights": {"1g.10gb": 0.125, "4g.40gb": 0.5},
    "prices": {"gpuModels": {"H100-80GB": 2.0}, "migProfiles": {"1g.10gb": 0.5}},
}
ORDER = [
    *(f"gpuaas-team-{t}" for t in ("vision", "language", "speech", "research", "inference", "platform-qa")),
    "gpuaas-fleet",
    "gpuaas-dcgm",
    "gpuaas-allocation",
    "gpuaas-queues",
    "gpuaas-alerts",
]


def config() -> StackConfig:
    """The onprem stack with the numbers above, and OpenSM in the cluster (its alert is tested too)."""
    raw = raw_stack("onprem")
    raw["observability"] = OBSERVABILITY
    opensm = raw["platform"]["fabric"]["opensm"]
    raw["platform"]["fabric"]["opensm"] = {**opensm, "deployInCluster": True, "node": "gpu-node-01"}
    return parse_config(raw)


ALLOCATION_SERIES = [
    *NODES,
    *pod("vision", "train-0", "gpu-node-01", {"nvidia_com_gpu": 4}, 1, 360),
    *pod("research", "sweep-0", "gpu-node-05", {"nvidia_com_mig_1g_10gb": 3, "nvidia_com_mig_4g_40gb": 1}, 1, 720),
    *pod("inference", "serve-0", "gpu-node-06", {"nvidia_com_gpu_shared": 2}, 1, DAY),
    *(dcgm("DCGM_FI_DEV_GPU_UTIL", "gpu-node-01", g, 50, 1, 360, namespace="vision", pod="train-0") for g in range(4)),
    *(dcgm("DCGM_FI_DEV_FB_USED", "gpu-node-01", g, 1024, 1, 360, namespace="vision", pod="train-0") for g in range(4)),
    dcgm(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gpu-node-05",
        0,
        0.5,
        1,
        720,
        GPU_I_ID="1",
        GPU_I_PROFILE="4g.40gb",
        namespace="research",
        pod="sweep-0",
    ),
    *(
        dcgm(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "gpu-node-05",
            0,
            1,
            1,
            720,
            GPU_I_ID=str(i),
            GPU_I_PROFILE="1g.10gb",
            namespace="research",
            pod="sweep-0",
        )
        for i in (2, 3, 4)
    ),
    dcgm("DCGM_FI_DEV_GPU_UTIL", "gpu-node-06", 0, 90, 1, DAY, namespace="inference", pod="serve-0"),
    dcgm("DCGM_FI_DEV_FB_USED", "gpu-node-06", 0, 4096, 1, DAY, namespace="inference", pod="serve-0"),
]

ALLOCATION_EXPECTED = [
    # Units per kind at 2 h: what each pod requests.
    (
        "gpuaas:team_kind:gpus_allocated",
        120,
        [
            ('{team="vision", node_group="h100-full", resource="nvidia_com_gpu"}', 4),
            ('{team="research", node_group="h100-mig", resource="nvidia_com_mig_1g_10gb"}', 3),
            ('{team="research", node_group="h100-mig", resource="nvidia_com_mig_4g_40gb"}', 1),
            ('{team="inference", node_group="h100-shared", resource="nvidia_com_gpu_shared"}', 2),
        ],
    ),
    # GPU-equivalents: vision 4 x 1; research 3 x 0.125 + 1 x 0.5 = 0.875; inference 2 x 1/2 = 1.
    (
        "gpuaas:team_node_group:gpu_equivalents_allocated",
        120,
        [
            ('{team="vision", node_group="h100-full"}', 4),
            ('{team="research", node_group="h100-mig"}', 0.875),
            ('{team="inference", node_group="h100-shared"}', 1),
        ],
    ),
    # Used: vision 4 GPUs x 0.50 = 2; research 0.5 x 0.5 + 3 x 1.0 x 0.125 = 0.625; inference: a
    # time-sliced GPU's utilization is not attributable, so no series.
    (
        "gpuaas:team_node_group:gpu_equivalents_used",
        120,
        [('{team="vision", node_group="h100-full"}', 2), ('{team="research", node_group="h100-mig"}', 0.625)],
    ),
    # Memory: vision 4 x 1024 MiB = 4 GiB; inference's time-sliced GPU is not attributable.
    ("gpuaas:team_node_group:memory_used_bytes", 120, [('{team="vision", node_group="h100-full"}', 4 * 2**30)]),
    # GPU-hours of the day at minute 1440 (the window (0, 1440]): vision 4 x 6 h = 24; research
    # 0.875 x 12 h = 10.5; inference 1 x 24 h = 24.
    (
        "gpuaas:team_node_group:gpu_hours_allocated:1d",
        DAY,
        [
            ('{team="vision", node_group="h100-full"}', 24),
            ('{team="research", node_group="h100-mig"}', 10.5),
            ('{team="inference", node_group="h100-shared"}', 24),
        ],
    ),
    # Used GPU-hours: vision 2 x 6 h = 12; research 0.625 x 12 h = 7.5.
    (
        "gpuaas:team_node_group:gpu_hours_used:1d",
        DAY,
        [('{team="vision", node_group="h100-full"}', 12), ('{team="research", node_group="h100-mig"}', 7.5)],
    ),
    # The fleet facts the config writes: a 1g.10gb is worth 0.125 GPU, priced 0.5/h itself; a 4g
    # costs its weight x the GPU model's price: 0.5 x 2.0 = 1.0; a share 0.5 x 2.0 = 1.0.
    (
        'gpuaas:gpu_kind:weight{node_group="h100-mig"}',
        120,
        [
            (
                '{node_group="h100-mig", resource="nvidia_com_mig_1g_10gb", kube_resource="nvidia.com/mig-1g.10gb", '
                'sharing="mig", gpu_model="H100-80GB", profile="1g.10gb"}',
                0.125,
            ),
            (
                '{node_group="h100-mig", resource="nvidia_com_mig_4g_40gb", kube_resource="nvidia.com/mig-4g.40gb", '
                'sharing="mig", gpu_model="H100-80GB", profile="4g.40gb"}',
                0.5,
            ),
        ],
    ),
    (
        'gpuaas:gpu_kind:price_per_hour{node_group=~"h100-mig|h100-shared"}',
        120,
        [
            (
                '{node_group="h100-mig", resource="nvidia_com_mig_1g_10gb", kube_resource="nvidia.com/mig-1g.10gb", '
                'sharing="mig", gpu_model="H100-80GB", profile="1g.10gb", currency="USD"}',
                0.5,
            ),
            (
                '{node_group="h100-mig", resource="nvidia_com_mig_4g_40gb", kube_resource="nvidia.com/mig-4g.40gb", '
                'sharing="mig", gpu_model="H100-80GB", profile="4g.40gb", currency="USD"}',
                1.0,
            ),
            (
                '{node_group="h100-shared", resource="nvidia_com_gpu_shared", kube_resource="nvidia.com/gpu.shared", '
                'sharing="time-slicing", gpu_model="H100-80GB", currency="USD"}',
                1.0,
            ),
        ],
    ),
    # Capacity from the config: 1 MIG node x 8 GPUs x 3 = 24 1g.10gb; 1 shared node x 8 x 2 = 16 shares.
    (
        'gpuaas:gpu_kind:capacity{resource=~"nvidia_com_mig_1g_10gb|nvidia_com_gpu_shared"}',
        120,
        [
            (
                '{node_group="h100-mig", resource="nvidia_com_mig_1g_10gb", kube_resource="nvidia.com/mig-1g.10gb", '
                'sharing="mig", gpu_model="H100-80GB", profile="1g.10gb"}',
                24,
            ),
            (
                '{node_group="h100-shared", resource="nvidia_com_gpu_shared", kube_resource="nvidia.com/gpu.shared", '
                'sharing="time-slicing", gpu_model="H100-80GB"}',
                16,
            ),
        ],
    ),
    ('gpuaas:node:gpus_expected{node="gpu-node-05"}', 120, [('{node="gpu-node-05", node_group="h100-mig"}', 8)]),
    ("gpuaas:rules:evaluation_interval_seconds", 120, [("{}", 60)]),
]


def kueue(metric: str, cq: str, value: str, resource: str = "nvidia.com/gpu") -> dict[str, str]:
    return {
        "series": f'{metric}{{cohort="gpuaas", cluster_queue="{cq}", flavor="h100-full", resource="{resource}", '
        'replica_role="leader"}',
        "values": value,
    }


def two_phase(first: float, then: float) -> str:
    """``first`` for minutes 0..720, ``then`` for 721..1440."""
    return " ".join([str(first)] * 721 + [str(then)] * 720)


INF = always("+Inf")
# Borrowing for 12 h: vision (nominal 12) uses 16 = borrows 4; language (nominal 12, lendingLimit 8)
# uses 6: idle 6, lendable min(6, 8) = 6; speech (nominal 8, no limit) uses 6: lendable 2. The
# cohort lends 6 + 2 = 8 and its borrowers hold 4, half of it: language lends 3, speech 1. After
# 12 h vision is back at 12 and nobody borrows.
QUEUE_SERIES = [
    kueue("kueue_cluster_queue_nominal_quota", "vision", always(12)),
    kueue("kueue_cluster_queue_resource_usage", "vision", two_phase(16, 12)),
    kueue("kueue_cluster_queue_lending_limit", "vision", INF),
    kueue("kueue_cluster_queue_nominal_quota", "language", always(12)),
    kueue("kueue_cluster_queue_resource_usage", "language", always(6)),
    kueue("kueue_cluster_queue_lending_limit", "language", always(8)),
    kueue("kueue_cluster_queue_nominal_quota", "speech", always(8)),
    kueue("kueue_cluster_queue_resource_usage", "speech", always(6)),
    kueue("kueue_cluster_queue_lending_limit", "speech", INF),
    # A follower replica's stale numbers must not count (Kueue's replica_role).
    {
        "series": 'kueue_cluster_queue_resource_usage{cohort="gpuaas", cluster_queue="vision", flavor="h100-full", '
        'resource="nvidia.com/gpu", replica_role="follower"}',
        "values": always(100),
    },
]
QUEUE_EXPECTED = [
    # Lenders borrow nothing: their series are 0.
    (
        "gpuaas:team_node_group:gpu_equivalents_borrowed",
        120,
        [
            ('{team="vision", node_group="h100-full"}', 4),
            ('{team="language", node_group="h100-full"}', 0),
            ('{team="speech", node_group="h100-full"}', 0),
        ],
    ),
    (
        "gpuaas:team_node_group:gpu_equivalents_lent > 0",
        120,
        [('{team="language", node_group="h100-full"}', 3), ('{team="speech", node_group="h100-full"}', 1)],
    ),
    # Over the day (samples 1..720 borrowing): vision 4 x 12 h = 48; language 3 x 12 = 36; speech 12.
    ("gpuaas:team_node_group:gpu_hours_borrowed:1d > 0", DAY, [('{team="vision", node_group="h100-full"}', 48)]),
    (
        "gpuaas:team_node_group:gpu_hours_lent:1d > 0",
        DAY,
        [('{team="language", node_group="h100-full"}', 36), ('{team="speech", node_group="h100-full"}', 12)],
    ),
]


def util_series(percent: float, minutes: int, then: float | None = None) -> list[dict[str, str]]:
    values = [str(percent)] * minutes + ([str(then)] * (121 - minutes) if then is not None else [])
    return [
        *NODES,
        *pod("vision", "train-0", "gpu-node-01", {"nvidia_com_gpu": 1}, 0, 120),
        {
            "series": 'DCGM_FI_DEV_GPU_UTIL{node="gpu-node-01", gpu="0", UUID="GPU-a", namespace="vision", pod="train-0"}',  # noqa: E501
            "values": " ".join(values),
        },
    ]


IDLE_ALERT = {
    "labels": {
        **ROUTING,
        "severity": "warning",
        "node": "gpu-node-01",
        "gpu": "0",
        "UUID": "GPU-a",
        "namespace": "vision",
        "pod": "train-0",
        "team": "vision",
        "node_group": "h100-full",
    },
    "annotations": {
        "summary": "GPU allocated to vision/train-0 is idle",
        "description": "Team vision: under 5 % for 1h on gpu-node-01 GPU 0.",
    },
}


def hardware_series() -> list[dict[str, str]]:
    temps = [dcgm("DCGM_FI_DEV_GPU_TEMP", "gpu-node-05", g, 40, 0, 60) for g in range(7)]  # GPU 7 missing
    return [
        *NODES,
        *temps,
        # gpu-node-06 reports all 8 under dcgm-exporter 4.9.0's name (an upgraded node: the exporter
        # alerts count both namings), GPU 2 held by inference's serve-0; gpu-node-01 none at all.
        *(dcgm("DCGM_FI_DEV_GPU_TEMP_CELSIUS", "gpu-node-06", g, 40, 0, 60) for g in (0, 1, 3, 4, 5, 6, 7)),
        dcgm("DCGM_FI_DEV_GPU_TEMP_CELSIUS", "gpu-node-06", 2, 40, 0, 60, namespace="inference", pod="serve-0"),
        {
            "series": 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{node="gpu-node-06", gpu="1", UUID="GPU-gpu-node-06-1"}',
            "values": "0x20 1x40",
        },
        {
            "series": 'DCGM_FI_DEV_PAGE_RETIRED_PENDING{node="gpu-node-06", gpu="2", UUID="GPU-gpu-node-06-2", '
            'namespace="inference", pod="serve-0"}',
            "values": "0x20 1x40",
        },
        {
            "series": 'kube_job_failed{namespace="vision", job_name="verify-nccl", condition="true"}',
            "values": "0x20 1x40",
        },
        {
            "series": 'kube_job_failed{namespace="vision", job_name="user-job", condition="true"}',
            "values": "1x60",
        },
    ]


def hardware_tests() -> list[dict[str, Any]]:
    def gpu(node: str, g: str, **extra: str) -> dict[str, str]:
        return {**ROUTING, "severity": "critical", "node": node, "gpu": g, "UUID": f"GPU-{node}-{g}", **extra}

    return [
        alert_test("GpuaasGpuEccDoubleBitErrors", 10, []),
        alert_test(
            "GpuaasGpuEccDoubleBitErrors",
            25,
            [
                {
                    "labels": gpu("gpu-node-06", "1"),
                    "annotations": {
                        "summary": "Uncorrectable ECC errors on gpu-node-06 GPU 1",
                        "description": "Double-bit volatile ECC errors in the last 10 minutes: drain the node and "
                        "reset the GPU.",
                    },
                }
            ],
        ),
        alert_test("GpuaasGpuRetiredPages", 10, []),
        alert_test(
            "GpuaasGpuRetiredPages",
            25,
            [
                {
                    "labels": gpu("gpu-node-06", "2", namespace="inference", pod="serve-0", team="inference"),
                    "annotations": {
                        "summary": "Memory pages retired or pending retirement on gpu-node-06 GPU 2",
                        "description": "Pages retired for double-bit errors, pending retirement (reset the GPU) or "
                        "a failed row remap.",
                    },
                }
            ],
        ),
        alert_test("GpuaasNodeMissingFromExporter", 5, []),
        alert_test(
            "GpuaasNodeMissingFromExporter",
            15,
            [
                {
                    "labels": {**ROUTING, "severity": "warning", "node": "gpu-node-01", "node_group": "h100-full"},
                    "annotations": {
                        "summary": "dcgm-exporter reports no GPU of node gpu-node-01",
                        "description": "The node is in the cluster; its dcgm-exporter pod is down or the driver is "
                        "not loaded.",
                    },
                }
            ],
        ),
        alert_test(
            "GpuaasGpuMissingFromExporter",
            15,
            [
                {
                    "labels": {**ROUTING, "severity": "warning", "node": "gpu-node-05", "node_group": "h100-mig"},
                    "annotations": {
                        "summary": "Node gpu-node-05 reports only 7 GPUs",
                        "description": "Fewer GPUs than node group h100-mig has per node: one fell off the bus "
                        "(XID 79).",
                    },
                }
            ],
        ),
        alert_test("GpuaasProofJobFailed", 10, []),
        alert_test(
            "GpuaasProofJobFailed",
            25,
            [
                {
                    "labels": {
                        **ROUTING,
                        "severity": "warning",
                        "namespace": "vision",
                        "job_name": "verify-nccl",
                        "condition": "true",
                        "team": "vision",
                    },
                    "annotations": {
                        "summary": "Proof Job vision/verify-nccl failed",
                        "description": "A verification or burn-in Job failed: read it with "
                        "workloads/gather_results.py.",
                    },
                }
            ],
        ),
        # kube-state-metrics' kube_pod_info is absent from these series: after 15 minutes it fires.
        alert_test("GpuaasKubeStateMetricsAbsent", 10, []),
        alert_test(
            "GpuaasKubeStateMetricsAbsent",
            20,
            [
                {
                    "labels": {**ROUTING, "severity": "warning"},
                    "annotations": {
                        "summary": "kube-state-metrics series are absent",
                        "description": "Allocation per team is computed from kube-state-metrics; Prometheus "
                        "scrapes none.",
                    },
                }
            ],
        ),
        alert_test(
            "GpuaasKueueMetricsAbsent",
            20,
            [
                {
                    "labels": {**ROUTING, "severity": "warning"},
                    "annotations": {
                        "summary": "Kueue's ClusterQueue metrics are absent",
                        "description": "Borrowing and lending are computed from Kueue's metrics: its ServiceMonitor "
                        "is not scraped (token, TLS or selector) or enableClusterQueueResources is off.",
                    },
                }
            ],
        ),
    ]


def starving(lendable_usage: float) -> list[dict[str, str]]:
    """vision has 2 GPUs pending for 60 minutes; language's usage decides the cohort's idle quota."""
    return [
        kueue("kueue_cluster_queue_nominal_quota", "vision", "12x60"),
        kueue("kueue_cluster_queue_resource_usage", "vision", "12x60"),
        kueue("kueue_cluster_queue_lending_limit", "vision", " ".join(["+Inf"] * 61)),
        kueue("kueue_cluster_queue_nominal_quota", "language", "12x60"),
        kueue("kueue_cluster_queue_resource_usage", "language", f"{lendable_usage}x60"),
        kueue("kueue_cluster_queue_lending_limit", "language", "8x60"),
        {
            "series": 'kueue_cluster_queue_resource_pending{cluster_queue="vision", resource="nvidia.com/gpu", '
            'replica_role="leader"}',
            "values": "2x60",
        },
    ]


STARVING = {
    "labels": {
        **ROUTING,
        "severity": "warning",
        "cluster_queue": "vision",
        "resource": "nvidia.com/gpu",
        "cohort": "gpuaas",
        "team": "vision",
    },
    "annotations": {
        "summary": "Team vision waits for nvidia.com/gpu while its cohort has idle quota",
        "description": "2 pending in cohort gpuaas: a borrowing limit, a flavor the workload cannot use, or idle "
        "quota too fragmented for its size.",
    },
}


def unit_tests() -> dict[str, Any]:
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "group_eval_order": ORDER,
        "tests": [
            case_group("allocation and use of a synthetic day", ALLOCATION_SERIES, expr_tests(ALLOCATION_EXPECTED), []),
            # dcgm-exporter 4.9.0's names and units give the same figures, everywhere or on one node.
            case_group(
                "the same day under dcgm-exporter 4.9.0's names",
                renamed(ALLOCATION_SERIES),
                expr_tests(ALLOCATION_EXPECTED),
                [],
            ),
            case_group(
                "the same day on a fleet half upgraded",
                renamed(ALLOCATION_SERIES, node="gpu-node-01"),
                expr_tests(ALLOCATION_EXPECTED),
                [],
            ),
            case_group("borrowing shows on the borrower and the lenders", QUEUE_SERIES, expr_tests(QUEUE_EXPECTED), []),
            # Idle: 2 % for the whole window fires once the window has passed, not before.
            case_group(
                "idle at 2 % for the window",
                util_series(2, 121),
                [],
                [
                    alert_test("GpuaasGpuAllocatedIdle", 50, []),
                    alert_test("GpuaasGpuAllocatedIdle", 70, [IDLE_ALERT]),
                ],
            ),
            case_group("busy at 40 %", util_series(40, 121), [], [alert_test("GpuaasGpuAllocatedIdle", 70, [])]),
            # 2 % for half the window (30 minutes), then busy: never fires.
            case_group(
                "idle at 2 % for half the window",
                util_series(2, 30, then=60),
                [],
                [alert_test("GpuaasGpuAllocatedIdle", 70, []), alert_test("GpuaasGpuAllocatedIdle", 110, [])],
            ),
            case_group("hardware and proofs", hardware_series(), [], hardware_tests()),
            case_group(
                "a queue starving while its cohort has idle quota",
                starving(4),
                [],
                [alert_test("GpuaasQueueStarving", 20, []), alert_test("GpuaasQueueStarving", 45, [STARVING])],
            ),
            # The twin: language uses its whole quota, nothing is idle, waiting is right.
            case_group(
                "a queue waiting while its cohort is full",
                starving(12),
                [],
                [alert_test("GpuaasQueueStarving", 45, [])],
            ),
            *fault_groups(),
        ],
    }


def write_rules(cfg: StackConfig, where: Path) -> Path:
    path = where / "rules.yaml"
    path.write_text(yaml.safe_dump(rule_file(cfg), sort_keys=False, width=200))
    return path


@pytest.mark.parametrize("stack", STACKS)
def test_promtool_check_rules_accepts_both_stacks(stack: str, tmp_path: Path) -> None:
    raw = raw_stack(stack)
    raw["observability"] = {**raw.get("observability", {}), "enabled": True}
    res = promtool("check", "rules", str(write_rules(parse_config(raw), tmp_path)))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_promtool_check_rules_refuses_a_broken_expression(tmp_path: Path) -> None:
    """The allowed twin above passes; one unbalanced parenthesis fails with the parser's reason."""
    doc = rule_file(config())
    doc["groups"][0]["rules"][0]["expr"] = "sum(vector(1)"  # type: ignore[index]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(doc))
    res = promtool("check", "rules", str(tmp_path / "rules.yaml"))
    assert res.returncode != 0
    assert "unclosed left parenthesis" in res.stdout + res.stderr


def test_promtool_test_rules_every_rule_on_a_synthetic_day(tmp_path: Path) -> None:
    write_rules(config(), tmp_path)
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(unit_tests(), sort_keys=False, width=400))
    res = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    assert "SUCCESS" in res.stdout


def test_every_rule_is_exercised_by_the_synthetic_day() -> None:
    """Every recording rule's series is asserted on (directly, or as the input of one that is) and
    every alert has a test: a rule added without a test fails here."""
    doc = unit_tests()
    asserted = " ".join(e["expr"] for t in doc["tests"] for e in t.get("promql_expr_test", []))
    alerted = {a["alertname"] for t in doc["tests"] for a in t.get("alert_rule_test", [])}
    rules = [r for g in rule_file(config())["groups"] for r in g["rules"]]  # type: ignore[attr-defined]
    # Inputs of asserted series: the per-pod and per-device series, the info series, the ClusterQueue ones.
    inputs = {
        "gpuaas:team:info",
        "gpuaas:node:info",
        "gpuaas:pod_gpu:allocated",
        "gpuaas:gpu_device:utilization_ratio",
        "gpuaas:gpu_device:utilization_ratio:avg5m",
        "gpuaas:cluster_queue:borrowed",
        "gpuaas:cluster_queue:lendable_idle",
        "gpuaas:cluster_queue:lent",
        # The stable dcgm series and per-device error series: the inputs of the alerts and of the
        # allocation series above, each proved through them.
        *(
            r.record
            for r in dcgm_group(config()).rules
            if isinstance(r, Recording) and r.record != "gpuaas:gpu_device:row_remap_uncorrectable_total"
        ),
    }
    missing = [
        r["record"] for r in rules if "record" in r and r["record"] not in asserted and r["record"] not in inputs
    ]
    assert not missing
    assert {r["alert"] for r in rules if "alert" in r} <= alerted
