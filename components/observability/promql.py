"""The rule definitions as data: recording rules, alerts and the PromQL idioms they share.

A :class:`Recording` or :class:`Alert` renders to one entry of a Prometheus rule group (the
``spec.groups[].rules[]`` of a PrometheusRule, and a rule file ``promtool`` reads). The dashboards
(:mod:`components.observability.dashboards`) and the showback command read the recorded series by
the constants of :mod:`components.observability.rules`, so a panel never spells a query of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

#: kube-state-metrics' and Kueue's multi-replica guard: only the leader (or a lone replica) reports
#: ClusterQueue resources truthfully (Kueue v0.19.2 pkg/util/roletracker: leader, follower, standalone).
NOT_FOLLOWER = 'replica_role!="follower"'


@dataclass(frozen=True)
class Recording:
    record: str
    expr: str
    labels: dict[str, str] = field(default_factory=dict)

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {"record": self.record, "expr": self.expr}
        if self.labels:
            out["labels"] = dict(sorted(self.labels.items()))
        return out


@dataclass(frozen=True)
class Alert:
    alert: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    labels: dict[str, str] = field(default_factory=dict)

    def render(self, routing: dict[str, str], runbooks: str) -> dict[str, Any]:
        """The rule; ``runbooks`` is the base the alert's page ``<alert>.md`` is found under."""
        labels = {**routing, **self.labels, "severity": self.severity}
        out: dict[str, Any] = {"alert": self.alert, "expr": self.expr}
        if self.for_ != "0s":
            out["for"] = self.for_
        out["labels"] = dict(sorted(labels.items()))
        out["annotations"] = {
            "summary": self.summary,
            "description": self.description,
            "runbook_url": runbook_url(runbooks, self.alert),
        }
        return out


Rule = Recording | Alert


@dataclass(frozen=True)
class Group:
    name: str
    interval: str
    rules: tuple[Rule, ...]

    def render(self, routing: dict[str, str], runbooks: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "interval": self.interval,
            "rules": [r.render(routing, runbooks) if isinstance(r, Alert) else r.render() for r in self.rules],
        }


def runbook_url(base: str, alert: str) -> str:
    """The alert's runbook page under ``base`` (``gpuaas:observability.runbookBaseUrl``)."""
    return f"{base.rstrip('/')}/{alert}.md"


def regex_alternation(values: list[str]) -> str:
    """An RE2 alternation matching exactly ``values`` (dots and other metacharacters escaped).

    Returned as it goes inside a PromQL double-quoted string: backslashes doubled.
    """
    return "|".join(re.escape(v).replace("\\", "\\\\") for v in values)


def with_team(expr: str, info: str) -> str:
    """``expr`` with ``team`` on the series whose ``namespace`` is a team's, the others unchanged.

    ``info`` is the team info series (``namespace`` → ``team``). The ``unless`` keeps series with
    no namespace (a GPU no pod holds) and with a namespace of no team, without doubling the rest.
    """
    return f"(({expr}) * on (namespace) group_left (team) {info}) or (({expr}) unless on (namespace) {info})"
