"""Building blocks of the promtool rule tests: series by the minute, DCGM and pod series, test entries.

Shared by tests/e2e/test_rules_hold_on_synthetic_series.py and tests/e2e/fault_cases.py.
"""

from __future__ import annotations

from typing import Any

from components.model.observability import RUNBOOK_DIR

DAY = 1440  # minutes


def during(value: float | str, first: int, last: int, total: int = DAY + 1) -> str:
    """Series values, one per minute from 0 to ``total``-1: ``value`` in [first, last], absent before,
    a staleness marker right after (so no 5-minute lookback stretches it)."""
    out = ["_"] * total
    for i in range(first, min(last, total - 1) + 1):
        out[i] = str(value)
    if last + 1 < total:
        out[last + 1] = "stale"
    return " ".join(out)


def always(value: float | str, total: int = DAY + 1) -> str:
    return " ".join([str(value)] * total)


NODES = [
    {"series": f'kube_node_info{{node="{n}", kernel_version="6.8"}}', "values": always(1)}
    for n in ("gpu-node-01", "gpu-node-05", "gpu-node-06")
]


def pod(ns: str, name: str, node: str, requests: dict[str, int], first: int, last: int) -> list[dict[str, str]]:
    out = [
        {
            "series": f'kube_pod_status_phase{{namespace="{ns}", pod="{name}", phase="Running", uid="{name}"}}',
            "values": during(1, first, last),
        }
    ]
    for res, n in requests.items():
        out.append(
            {
                "series": f'kube_pod_container_resource_requests{{namespace="{ns}", pod="{name}", container="main", '
                f'node="{node}", resource="{res}", unit="integer", uid="{name}"}}',
                "values": during(n, first, last),
            }
        )
    return out


def dcgm(metric: str, node: str, gpu: int, value: float | str, first: int, last: int, **labels: str) -> dict[str, str]:
    extra = "".join(f', {k}="{v}"' for k, v in labels.items())
    return {
        "series": f'{metric}{{node="{node}", gpu="{gpu}", UUID="GPU-{node}-{gpu}", modelName="H100"{extra}}}',
        "values": during(value, first, last),
    }


# A synthetic day: vision holds 4 whole GPUs for 6 h (minutes 1..360) at 50 %; research 3 x 1g.10gb
# and 1 x 4g.40gb for 12 h (1..720), the 4g at 0.5 and the 1g at 1.0; inference 2 time-sliced shares
# all day (1..1440), their GPU busy at 90 % (not attributable to a team).
def expr_tests(expected: list[tuple[str, int, list[tuple[str, float]]]]) -> list[dict[str, Any]]:
    out = []
    for expr, minute, samples in expected:
        name = expr.split("{")[0].split(" ")[0]
        out.append(
            {
                "expr": expr,
                "eval_time": f"{minute}m",
                "exp_samples": [{"labels": name + labels, "value": value} for labels, value in samples],
            }
        )
    return out


ROUTING = {"routing": "gpu-platform"}


def alert_test(name: str, minute: int, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    """Alert ``name`` at ``minute`` is exactly ``alerts``; each carries its runbook under the default base."""
    runbook = {"runbook_url": f"{RUNBOOK_DIR}/{name}.md"}
    return {
        "eval_time": f"{minute}m",
        "alertname": name,
        "exp_alerts": [{"exp_labels": a["labels"], "exp_annotations": {**a["annotations"], **runbook}} for a in alerts],
    }


def case_group(name: str, series: list[dict[str, str]], exprs: list[Any], alerts: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "interval": "1m", "input_series": series}
    if exprs:
        out["promql_expr_test"] = exprs
    if alerts:
        out["alert_rule_test"] = alerts
    return out
