"""The monitoring objects: PrometheusRules, Kueue's ServiceMonitor and the credentials its endpoint wants.

Pure renderers (plain dicts) that :class:`components.observability.component.Observability` applies.
dcgm-exporter's ServiceMonitor is the GPU Operator's own (``dcgmExporter.serviceMonitor``, rendered
by :func:`components.operators.gpu_operator.dcgm_exporter_values`). Objects follow the
prometheus-operator v0.93.0 CRDs (monitoring.coreos.com/v1; ../shared/upstream/prometheus-operator-v0.93.0).

Kueue serves its metrics over HTTPS on 8443 behind controller-runtime's authentication and
authorization filter (its chart's ``metricsService`` and ``metrics_auth_role``): a scraper needs
a bearer token whose identity may ``get`` the non-resource URL ``/metrics``. gpuaas gives
Prometheus one of its own: a ServiceAccount in Kueue's namespace, a token Secret for it, a
ClusterRole for ``/metrics`` bound to it, and the ServiceMonitor's ``authorization`` naming that
Secret (a ServiceMonitor reads Secrets of its own namespace). The serving certificate is Kueue's
self-signed one unless cert-manager issues it, so TLS is not verified — what Kueue's own chart
does (``metrics.serviceMonitor.tlsConfig.insecureSkipVerify: true``); the token is what the
endpoint authenticates, and it can read ``/metrics`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from components.k8s import Manifest
from components.model.observability import Observability
from components.model.resources import PART_OF, TEAM_LABEL
from components.observability.promql import Group

MONITORING: Final = "monitoring.coreos.com/v1"
SCRAPER: Final = "gpuaas-metrics-scraper"
SCRAPER_TOKEN: Final = "gpuaas-metrics-scraper-token"
METRICS_READER: Final = "gpuaas-metrics-reader"
#: Kueue's Helm release (components/queueing/queues.py RELEASE): its metrics Service carries the
#: chart's selector labels (charts/kueue templates/_helpers.tpl ``kueue.metricsService.labels``).
KUEUE_RELEASE: Final = "kueue"
KUEUE_METRICS_SERVICE_LABELS: Final = {
    "app.kubernetes.io/name": "kueue",
    "app.kubernetes.io/instance": KUEUE_RELEASE,
    "app.kubernetes.io/component": "metrics-service",
}


def _meta(name: str, namespace: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {**PART_OF, **(labels or {})}
    return meta


def prometheus_rules(
    o: Observability, team_groups: Mapping[str, Group], groups: Mapping[str, Group]
) -> dict[str, Manifest]:
    """Role → PrometheusRule, one group each (a team's own object: adding a team changes no other):
    ``team-<name>`` for each of ``team_groups`` (team name → group), then ``groups`` by their role.

    A team's carries the team label too, so that the plan index and a diff name its team."""
    routing = dict(o.alert_labels)
    out: dict[str, Manifest] = {}
    every: list[tuple[str, str | None, Group]] = [(f"team-{name}", name, g) for name, g in team_groups.items()]
    every += [(role, None, g) for role, g in groups.items()]
    for role, team, group in every:
        labels = dict(o.prometheus.rule_labels)
        if team is not None:
            labels[TEAM_LABEL] = team
        out[role] = {
            "apiVersion": MONITORING,
            "kind": "PrometheusRule",
            "metadata": _meta(f"gpuaas-{role}", o.prometheus.namespace, labels),
            "spec": {"groups": [group.render(routing, o.runbook_base_url)]},
        }
    return out


def kueue_scrape_objects(o: Observability, ns: str) -> dict[str, Manifest]:
    """Role → object of Kueue's scrape (Kueue in namespace ``ns``): the token's ServiceAccount and
    Secret, its RBAC, the ServiceMonitor."""
    return {
        "scraper": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(SCRAPER, ns)},
        "scraper-token": {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {**_meta(SCRAPER_TOKEN, ns), "annotations": {"kubernetes.io/service-account.name": SCRAPER}},
        },
        "metrics-reader": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(METRICS_READER, None),
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
        "metrics-reader-binding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(METRICS_READER, None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER},
            "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": ns}],
        },
        "kueue-monitor": {
            "apiVersion": MONITORING,
            "kind": "ServiceMonitor",
            "metadata": _meta("gpuaas-kueue", ns, dict(o.prometheus.monitor_labels)),
            "spec": {
                "selector": {"matchLabels": dict(KUEUE_METRICS_SERVICE_LABELS)},
                "namespaceSelector": {"matchNames": [ns]},
                "endpoints": [
                    {
                        "port": "https",
                        "scheme": "https",
                        "path": "/metrics",
                        "interval": "30s",
                        "authorization": {"type": "Bearer", "credentials": {"name": SCRAPER_TOKEN, "key": "token"}},
                        "tlsConfig": {"insecureSkipVerify": True},
                    }
                ],
            },
        },
    }
