"""The observability step: PrometheusRules, dashboards and Kueue's scrape, once the Prometheus stack's CRDs are there.

gpuaas plugs into a Prometheus stack it does not install (:class:`components.model.observability.PrometheusStack`).
Before any monitoring object, the component reads the prometheus-operator CRDs it uses; where one
is absent the read fails the run (``pulumi preview`` and ``pulumi up``) naming it, and every
monitoring object depends on those reads, so nothing of the monitoring is half-installed.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components import k8s as kube
from components.model.config import StackConfig
from components.observability.dashboards import dashboard_configmaps
from components.observability.monitors import kueue_scrape_objects, prometheus_rules

#: The prometheus-operator CRDs the monitoring objects (and the GPU Operator's dcgm-exporter
#: ServiceMonitor, which the operator skips silently without its CRD) need.
REQUIRED_CRDS = ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com")


class Observability(pulumi.ComponentResource):
    """Rules, dashboards and Kueue's ServiceMonitor; ``after``: the Kueue namespace and the teams."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        after: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("gpuaas:index:Observability", name, None, opts)
        crds: list[pulumi.Resource] = [
            k8s.apiextensions.v1.CustomResourceDefinition.get(
                f"{name}-needs-{crd.split('.')[0]}-crd", crd, opts=pulumi.ResourceOptions(parent=self)
            )
            for crd in REQUIRED_CRDS
        ]
        for role, manifest in prometheus_rules(cfg).items():
            kube.apply(f"{name}-rules-{role}", manifest, kube.child(self, crds))
        for role, manifest in dashboard_configmaps(cfg).items():
            kube.apply(f"{name}-{role}", manifest, kube.child(self, crds))
        if cfg.queues.elastic:
            objects = kueue_scrape_objects(cfg)
            base = kube.child(self, [*crds, *after])
            sa = kube.apply(f"{name}-scraper", objects["scraper"], base)
            token = kube.apply(f"{name}-scraper-token", objects["scraper-token"], kube.child(self, [sa]))
            reader = kube.apply(f"{name}-metrics-reader", objects["metrics-reader"], base)
            binding = kube.apply(
                f"{name}-metrics-reader-binding", objects["metrics-reader-binding"], kube.child(self, [reader, sa])
            )
            kube.apply(f"{name}-kueue-monitor", objects["kueue-monitor"], kube.child(self, [token, binding]))
        self.register_outputs({"prometheusRules": sorted(prometheus_rules(cfg))})
