"""Every PromQL expression of every rule and dashboard parses with the real parser and names only real metrics.

The parser is the real Prometheus' (``/api/v1/parse_query``). A metric name must be one of:
dcgm-exporter 4.5.3-4.8.2's ``default-counters.csv`` (commented-out fields count: they are real
DCGM fields the defaults leave off), a DCGM field the model or the renames table names with its
source (``DCGM_FIELDS_BEYOND_DEFAULTS``, dcgm-exporter 4.9.0's names in ``dcgm.RENAMES``),
kube-state-metrics v2.20.0's ``docs/metrics/`` or the custom-resource-state metric gpuaas
configures (``operator_state.STATE_METRIC``), Kueue v0.19.2's ``pkg/metrics`` (its Go module,
downloaded by the e2e tool build), or a series the rules themselves record.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.model.observability import DCGM_FIELDS_BEYOND_DEFAULTS
from components.observability.dashboards import dashboards, panel_queries
from components.observability.dcgm import RENAMES
from components.observability.groups import rule_file
from components.observability.operator_state import STATE_METRIC
from e2e import upstream
from tests.conftest import STACKS, raw_stack
from tests.e2e.prometheus import parse_query, prometheus, selector_names


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is absent: the e2e tool build downloads Kueue's module")
    return path


def dcgm_names() -> set[str]:
    """The upstream folder's files through e2e/upstream.py: absent or not upstream's fails, naming it."""
    text = (upstream.root() / "dcgm-exporter-4.5.3-4.8.2" / "default-counters.csv").read_text()
    return set(re.findall(r"^#?\s*(DCGM_\w+)\s*,", text, re.M))


def sourced_names() -> set[str]:
    """Names beyond the stored references, each with its source in the code that reads it."""
    return {*DCGM_FIELDS_BEYOND_DEFAULTS, *(r.new for r in RENAMES), STATE_METRIC}


def ksm_names() -> set[str]:
    docs = upstream.root() / "kube-state-metrics-v2.20.0" / "docs" / "metrics"
    return {m for f in docs.rglob("*.md") for m in re.findall(r"^\|\s*(kube_\w+)\s*\|", f.read_text(), re.M)}


def kueue_names() -> set[str]:
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    pkg = _need(Path(gomodcache) / "sigs.k8s.io" / "kueue@v0.19.2" / "pkg" / "metrics")
    names: set[str] = set()
    for f in pkg.glob("*.go"):
        text = f.read_text()
        for sub, name in re.findall(r"Subsystem:\s*constants\.(\w+),\s*Name:\s*\"(\w+)\"", text):
            names.add(f"{'kueue' if sub == 'KueueName' else 'multikueue'}_{name}")
    return names


def config(stack: str) -> StackConfig:
    raw = raw_stack(stack)
    raw["observability"] = {**raw.get("observability", {}), "enabled": True}
    return parse_config(raw)


def expressions(cfg: StackConfig) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for group in rule_file(cfg)["groups"]:  # type: ignore[attr-defined]
        for rule in group["rules"]:
            out.append((rule.get("record") or rule["alert"], rule["expr"]))
    for role, board in dashboards(cfg.observability, queues=cfg.queues.elastic).items():
        for q in panel_queries(board):
            # Grafana's own: label_values(<series>, <label>) and the $team variable.
            q = re.sub(r"^label_values\((.+), \w+\)$", r"\1", q).replace("$team", "vision")
            out.append((f"dashboard {role}", q))
    return out


@pytest.fixture(scope="module")
def parser_url(tmp_path_factory: pytest.TempPathFactory) -> object:
    with prometheus(tmp_path_factory.mktemp("parser") / "data") as url:
        yield url


def test_the_reference_readers_find_real_names() -> None:
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"} <= dcgm_names()
    assert {"kube_pod_container_resource_requests", "kube_job_failed", "kube_node_info"} <= ksm_names()
    assert {"kueue_cluster_queue_resource_usage", "kueue_pending_workloads"} <= kueue_names()


@pytest.mark.parametrize("stack", STACKS)
def test_every_expression_parses_and_names_real_metrics(stack: str, parser_url: str) -> None:
    cfg = config(stack)
    recorded = {r["record"] for g in rule_file(cfg)["groups"] for r in g["rules"] if "record" in r}  # type: ignore[attr-defined]
    known = dcgm_names() | sourced_names() | ksm_names() | kueue_names() | recorded
    problems = []
    for where, expr in expressions(cfg):
        doc = parse_query(parser_url, expr)
        if doc.get("status") != "success":
            problems.append(f"{where}: {doc.get('error')}")
            continue
        for name in sorted(selector_names(doc["data"]) - known):
            problems.append(f"{where}: {name} is in no upstream reference")
    assert not problems, "\n".join(problems)


def test_an_invented_metric_name_fails(parser_url: str) -> None:
    """The allowed case is the test above; here one name that exists nowhere is caught."""
    doc = parse_query(parser_url, 'sum(DCGM_FI_DEV_GPU_UTILISATION{namespace="x"}) / sum(kube_pod_info)')
    assert doc["status"] == "success"
    names = selector_names(doc["data"])
    assert names == {"DCGM_FI_DEV_GPU_UTILISATION", "kube_pod_info"}
    assert names - (dcgm_names() | ksm_names()) == {"DCGM_FI_DEV_GPU_UTILISATION"}
    bad = parse_query(parser_url, "sum(rate(DCGM_FI_DEV_GPU_UTIL[5m])")
    assert bad["status"] == "error" and "unclosed left parenthesis" in bad["error"]
