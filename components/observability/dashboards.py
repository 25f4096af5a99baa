"""Grafana dashboards from the rule definitions: a platform view and a team view, as sidecar ConfigMaps.

Built with Grafana's own SDK (PyPI ``grafana-foundation-sdk``, pinned in requirements.txt), and
every panel queries a series :mod:`components.observability.rules` records, by its constant (or
Kueue's own pending-work series), so a dashboard never computes a figure its rules do not. The
ConfigMaps carry the label the Grafana sidecar watches (kube-prometheus-stack
``grafana.sidecar.dashboards.label: grafana_dashboard``), one dashboard JSON each.
"""

from __future__ import annotations

import json
from typing import Any, Final

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from components.k8s import Manifest
from components.model.observability import Observability
from components.model.resources import PART_OF
from components.observability import rules as r
from components.observability.promql import NOT_FOLLOWER

DATASOURCE: Final = DataSourceRef(type_val="prometheus", uid="${datasource}")
TEAM: Final = "$team"


def _query(expr: str, legend: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).datasource(DATASOURCE)


def _series(title: str, unit: str, *queries: tuple[str, str], width: int = 12) -> timeseries.Panel:
    panel = timeseries.Panel().title(title).unit(unit).height(8).span(width).datasource(DATASOURCE)
    for expr, legend in queries:
        panel = panel.with_target(_query(expr, legend))
    return panel


def _stat(title: str, unit: str, expr: str) -> stat.Panel:
    return stat.Panel().title(title).unit(unit).height(4).span(6).datasource(DATASOURCE).with_target(_query(expr, ""))


def _table(title: str, expr: str) -> table.Panel:
    query = _query(expr, "").instant().format("table")  # type: ignore[arg-type]
    return table.Panel().title(title).height(8).span(24).datasource(DATASOURCE).with_target(query)


def _base(title: str, uid: str) -> dashboard.Dashboard:
    source = dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
    return (
        dashboard.Dashboard(title)
        .uid(uid)
        .tags(["gpuaas"])
        .refresh("1m")
        .time("now-24h", "now")
        .timezone("browser")
        .with_variable(source)
    )


def idle_expr(o: Observability) -> str:
    """Allocated GPUs under ``observability.idle.thresholdPercent`` (5-minute average)."""
    return f"{r.DEVICE_UTIL_5M} < {o.idle.threshold_percent / 100!r}"


def platform_dashboard(o: Observability, *, queues: bool) -> dict[str, Any]:
    """The fleet: allocated and used GPU-equivalents per node group, idle GPUs, borrowing in the cohort."""
    capacity = f"sum by (node_group) ({r.KIND_CAPACITY} * on (node_group, resource) group_left () {r.KIND_WEIGHT})"
    b = (
        _base("GPU platform", "gpuaas-platform")
        .with_row(dashboard.Row("Fleet"))
        .with_panel(_stat("GPUs allocated", "short", f"sum({r.TEAM_ALLOCATED})"))
        .with_panel(_stat("GPUs used", "short", f"sum({r.TEAM_USED})"))
        .with_panel(_stat("Allocated GPUs idle", "short", f"count({idle_expr(o)}) or vector(0)"))
        .with_row(dashboard.Row("Per node group (Kueue flavor)"))
        .with_panel(
            _series(
                "Allocated vs capacity (GPU-equivalents)",
                "short",
                (f"sum by (node_group) ({r.TEAM_ALLOCATED})", "{{node_group}} allocated"),
                (capacity, "{{node_group}} capacity"),
            )
        )
        .with_panel(
            _series("Used (GPU-equivalents)", "short", (f"sum by (node_group) ({r.TEAM_USED})", "{{node_group}}"))
        )
        .with_panel(
            _series(
                "Allocated per team and node group", "short", (r.TEAM_ALLOCATED, "{{team}} / {{node_group}}"), width=24
            )
        )
        .with_row(dashboard.Row("Idle GPUs"))
        .with_panel(_table("Allocated GPUs under the idle threshold (5 min average)", idle_expr(o)))
        .with_panel(
            _series(
                "GPU-hours of the last day",
                "short",
                (f"sum by (team) ({r.TEAM_HOURS_ALLOCATED})", "{{team}} allocated"),
                (f"sum by (team) ({r.TEAM_HOURS_USED})", "{{team}} used"),
                width=24,
            )
        )
    )
    if queues:  # Kueue's borrowing exists only with elastic queues
        b = (
            b.with_row(dashboard.Row("Borrowing in the cohort"))
            .with_panel(_series("Borrowed", "short", (r.TEAM_BORROWED, "{{team}} / {{node_group}}")))
            .with_panel(_series("Lent", "short", (r.TEAM_LENT, "{{team}} / {{node_group}}")))
        )
    return _encode(b)


def team_dashboard(o: Observability, *, queues: bool) -> dict[str, Any]:
    """One team (variable ``team``): its share, its use, its pending work; ``queues``: Kueue's too."""
    team_var = (
        dashboard.QueryVariable("team").label("Team").query(f"label_values({r.TEAM_INFO}, team)").datasource(DATASOURCE)
    )
    sel = f'{{team="{TEAM}"}}'
    pending = f'sum by (resource) (kueue_cluster_queue_resource_pending{{cluster_queue="{TEAM}", {NOT_FOLLOWER}}})'
    workloads = f'sum by (status) (kueue_pending_workloads{{cluster_queue="{TEAM}", {NOT_FOLLOWER}}})'
    nominal = (
        f'sum by (flavor, resource) (kueue_cluster_queue_nominal_quota{{cluster_queue="{TEAM}", {NOT_FOLLOWER}, '
        'resource=~"nvidia.com/.+"})'
    )
    b = (
        _base("GPU team", "gpuaas-team")
        .with_variable(team_var)
        .with_row(dashboard.Row("Share"))
        .with_panel(_stat("GPUs allocated", "short", f"sum({r.TEAM_ALLOCATED}{sel})"))
        .with_panel(_stat("GPUs used", "short", f"sum({r.TEAM_USED}{sel})"))
        .with_panel(
            _series(
                "Allocated by kind", "short", (f"{r.TEAM_KIND_ALLOCATED}{sel}", "{{node_group}} {{resource}}"), width=12
            )
        )
        .with_row(dashboard.Row("Use"))
        .with_panel(
            _series(
                "Allocated vs used (GPU-equivalents)",
                "short",
                (f"sum by (node_group) ({r.TEAM_ALLOCATED}{sel})", "{{node_group}} allocated"),
                (f"sum by (node_group) ({r.TEAM_USED}{sel})", "{{node_group}} used"),
            )
        )
        .with_panel(_series("GPU memory used", "bytes", (f"{r.TEAM_MEMORY}{sel}", "{{node_group}}")))
        .with_panel(_table("Idle GPUs of the team", f"{r.DEVICE_UTIL_5M}{sel} < {o.idle.threshold_percent / 100!r}"))
    )
    hours = [(f"sum({r.TEAM_HOURS_ALLOCATED}{sel})", "allocated"), (f"sum({r.TEAM_HOURS_USED}{sel})", "used")]
    if queues:  # the share Kueue guarantees, what it lends and borrows, the work it holds
        hours += [(f"sum({r.TEAM_HOURS_BORROWED}{sel})", "borrowed"), (f"sum({r.TEAM_HOURS_LENT}{sel})", "lent")]
        b = (
            b.with_row(dashboard.Row("Borrowing and pending work"))
            .with_panel(_stat("GPUs borrowed", "short", f"sum({r.TEAM_BORROWED}{sel}) or vector(0)"))
            .with_panel(_stat("GPUs lent", "short", f"sum({r.TEAM_LENT}{sel}) or vector(0)"))
            .with_panel(_series("Guaranteed quota (Kueue nominal)", "short", (nominal, "{{flavor}} {{resource}}")))
            .with_panel(_series("Pending requests", "short", (pending, "{{resource}}")))
            .with_panel(_series("Pending workloads", "short", (workloads, "{{status}}")))
        )
    b = b.with_panel(_series("GPU-hours of the last day", "short", *hours, width=24))
    return _encode(b)


def _encode(b: dashboard.Dashboard) -> dict[str, Any]:
    """The dashboard's JSON with panel ids and query refIds numbered (Grafana wants them unique)."""
    out: dict[str, Any] = json.loads(JSONEncoder(sort_keys=True).encode(b.build()))
    for n, panel in enumerate(out.get("panels", []), start=1):
        panel["id"] = n
        for i, target in enumerate(panel.get("targets", [])):
            target["refId"] = chr(ord("A") + i)
    return out


def dashboards(o: Observability, *, queues: bool) -> dict[str, dict[str, Any]]:
    """Role → dashboard JSON; ``queues``: elastic queues (Kueue's borrowing and pending work shown)."""
    return {"platform": platform_dashboard(o, queues=queues), "team": team_dashboard(o, queues=queues)}


def dashboard_configmaps(o: Observability, *, queues: bool) -> dict[str, Manifest]:
    """Role → the ConfigMap Grafana's sidecar loads one dashboard from (its label)."""
    g = o.grafana
    out: dict[str, Manifest] = {}
    for role, board in dashboards(o, queues=queues).items():
        out[f"dashboard-{role}"] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"gpuaas-dashboard-{role}",
                "namespace": o.dashboards_namespace,
                "labels": {**PART_OF, g.label: g.label_value},
            },
            "data": {f"gpuaas-{role}.json": json.dumps(board, indent=1, sort_keys=True)},
        }
    return out


def panel_queries(board: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard (panels and query variables), as written."""
    out: list[str] = []
    for panel in board.get("panels", []):
        out.extend(t["expr"] for t in panel.get("targets", []) if "expr" in t)
    for var in board.get("templating", {}).get("list", []):
        q = var.get("query")
        if var.get("type") == "query" and isinstance(q, str):
            out.append(q)
    return out
