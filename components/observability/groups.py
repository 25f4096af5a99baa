"""Every rule group, in the order they are evaluated, and the rule file ``promtool`` reads.

The dcgm group comes before the ones reading its stable-name series, the alerts last.
"""

from __future__ import annotations

from components.model.config import StackConfig
from components.observability.alerts import alerts
from components.observability.dcgm import dcgm_group
from components.observability.promql import Group
from components.observability.rules import allocation_group, fleet_group, queue_group, team_group


def rule_groups(cfg: StackConfig) -> dict[str, Group]:
    """Every rule group by the role of the PrometheusRule holding it (a team's, then the shared ones)."""
    return {**{f"team-{name}": g for name, g in team_groups(cfg).items()}, **platform_groups(cfg)}


def team_groups(cfg: StackConfig) -> dict[str, Group]:
    """Team name → the team's own rule group, in team order."""
    return {t.name: team_group(cfg, t.name) for t in cfg.teams}


def platform_groups(cfg: StackConfig) -> dict[str, Group]:
    """Role → the shared rule groups, in evaluation order (dcgm before its readers, the alerts last)."""
    out: dict[str, Group] = {}
    out["fleet"] = fleet_group(cfg)
    out["dcgm"] = dcgm_group(cfg)
    out["allocation"] = allocation_group(cfg)
    if cfg.queues.elastic:
        out["queues"] = queue_group(cfg)
    out["alerts"] = alerts(cfg)
    return out


def rule_file(cfg: StackConfig) -> dict[str, object]:
    """All groups as one Prometheus rule file (what ``promtool check rules`` reads)."""
    o = cfg.observability
    routing = dict(o.alert_labels)
    return {"groups": [g.render(routing, o.runbook_base_url) for g in rule_groups(cfg).values()]}
