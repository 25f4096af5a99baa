"""The observability step: PrometheusRules, dashboards and Kueue's scrape, once the Prometheus stack's CRDs are there.

gpuaas plugs into a Prometheus stack it does not install (:class:`components.model.observability.PrometheusStack`).
Before any monitoring object, the component reads the prometheus-operator CRDs it uses; where one
is absent the read fails the run (``pulumi preview`` and ``pulumi up``) naming it, and every
monitoring object depends on those reads, so nothing of the monitoring is half-installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components import k8s as kube
from components.model.observability import Observability as ObservabilityConfig
from components.observability.dashboards import dashboard_configmaps
from components.observability.monitors import kueue_scrape_objects, prometheus_rules
from components.observability.promql import Group

#: The prometheus-operator CRDs the monitoring objects (and the GPU Operator's dcgm-exporter
#: ServiceMonitor, which the operator skips silently without its CRD) need.
REQUIRED_CRDS = ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com")


@dataclass(frozen=True, kw_only=True)
class ObservabilityArgs:
    """Arguments of :class:`Observability`. Ordering: ``opts.depends_on``, forwarded to every child;
    ``kueue_after`` for Kueue's scrape alone.

    The rule groups arrive computed (:mod:`components.observability.groups` derives them from the
    whole fleet: node groups, capacities, teams, the resource model); the component renders and
    applies them, with the dashboards and Kueue's scrape.
    """

    observability: ObservabilityConfig = field(default_factory=ObservabilityConfig)
    """The Prometheus stack's namespaces and labels, alert routing and runbooks, Grafana's dashboard label and
    the idle threshold the dashboards show (``gpuaas:observability``)."""
    team_groups: Mapping[str, Group] = field(default_factory=dict)
    """Team name → the team's rule group: a PrometheusRule ``gpuaas-team-<name>`` each, labelled with the team."""
    groups: Mapping[str, Group] = field(default_factory=dict)
    """Role → the shared rule groups (fleet, dcgm, allocation, queues, alerts), a PrometheusRule ``gpuaas-<role>``
    each, in evaluation order."""
    kueue_namespace: str | None = None
    """Kueue's namespace: its ServiceMonitor and the scraper's token go there, and the dashboards show Kueue's
    borrowing and pending work. ``None`` (the default): no Kueue, nothing of it scraped or shown."""
    kueue_after: tuple[pulumi.Resource, ...] = ()
    """What Kueue's scrape alone waits for: Kueue's namespace, where its ServiceMonitor and token live (the
    rules and dashboards need not wait; ``opts.depends_on`` holds back every child)."""


class Observability(pulumi.ComponentResource):
    """Rules, dashboards and Kueue's ServiceMonitor, after the Prometheus stack's CRDs are read."""

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Observability", name, None, opts)
        after = kube.depends_on(opts)
        o = args.observability
        crds: list[pulumi.Resource] = [
            k8s.apiextensions.v1.CustomResourceDefinition.get(
                f"{name}-needs-{crd.split('.')[0]}-crd",
                crd,
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
            )
            for crd in REQUIRED_CRDS
        ]
        rules = prometheus_rules(o, args.team_groups, args.groups)
        for role, manifest in rules.items():
            kube.apply(f"{name}-rules-{role}", manifest, kube.child(self, [*crds, *after]))
        for role, manifest in dashboard_configmaps(o, queues=args.kueue_namespace is not None).items():
            kube.apply(f"{name}-{role}", manifest, kube.child(self, [*crds, *after]))
        if args.kueue_namespace is not None:
            objects = kueue_scrape_objects(o, args.kueue_namespace)
            base = kube.child(self, [*crds, *args.kueue_after, *after])
            sa = kube.apply(f"{name}-scraper", objects["scraper"], base)
            token = kube.apply(f"{name}-scraper-token", objects["scraper-token"], kube.child(self, [sa, *after]))
            reader = kube.apply(f"{name}-metrics-reader", objects["metrics-reader"], base)
            binding = kube.apply(
                f"{name}-metrics-reader-binding",
                objects["metrics-reader-binding"],
                kube.child(self, [reader, sa, *after]),
            )
            kube.apply(f"{name}-kueue-monitor", objects["kueue-monitor"], kube.child(self, [token, binding, *after]))
        self.register_outputs({"prometheusRules": sorted(rules)})
