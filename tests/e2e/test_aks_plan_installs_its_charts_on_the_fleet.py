"""The AKS stack's Kubernetes half on its simulated fleet, with the real charts.

The AKS program creates the Azure resources first (resource group, cluster, pools), which no
test here can; there is no switch in the product that skips them. So the AKS plan's Kubernetes
objects are applied to a fleet of the stack's pools (KWOK nodes with the labels and taints AKS
sets, tests/e2e/fleet_nodes.py), in install order, and each Helm release of the plan is installed
at its place by Helm (tool set ``helm``, the Helm the provider links) from the e2e's chart mirror,
with the plan's own values, waiting as the provider waits: the charts' hook Jobs complete, their
Deployments and DaemonSets become ready because KWOK runs their pods.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from typing import Any, Final

import pytest
import yaml

from components.loader import parse_config
from components.model.config import StackConfig
from components.plan.writer import HELM_RELEASE
from e2e.engine import NetworkOperatorStandIn, mirror
from e2e.fleet import Fleet
from e2e.kube import Kube
from e2e.plan_apply import Applied, HelmReleases, apply_plan, install_prerequisites
from tests.conftest import offline_run, raw_stack
from tests.e2e import chart_daemonsets
from tests.e2e.conftest import _say, need_upstream
from tests.e2e.fleet_nodes import fleet_nodes

CFG: Final[StackConfig] = parse_config(raw_stack("aks"))


class Installed:
    def __init__(self, fleet: Fleet, applied: list[Applied], helm: HelmReleases) -> None:
        self.fleet, self.applied, self.helm = fleet, applied, helm

    @property
    def kube(self) -> Kube:
        return self.fleet.kube


@pytest.fixture(scope="module")
def installed(pytestconfig: pytest.Config) -> Iterator[Installed]:
    need_upstream()
    fleet = Fleet.start([s.manifest() for s in fleet_nodes(CFG)])
    try:
        run = offline_run("aks")
        install_prerequisites(fleet.kube, run)
        helm = HelmReleases(fleet.cp.kubeconfig, mirror(), wait=True)
        # The Network Operator's part that our objects use (its ServiceAccounts); no NicClusterPolicy
        # is awaited here, as nothing but the engine awaits it.
        with NetworkOperatorStandIn(fleet.kube, namespace=CFG.network.namespace):
            applied = apply_plan(fleet.kube, run, releases=helm)
        _say(
            pytestconfig,
            f"e2e: aks fleet with charts: {len(fleet.nodes)} KWOK nodes, {len(applied)} objects, "
            + ", ".join(f"{name} by Helm in {s:.1f} s" for name, s in helm.installed.items()),
        )
        yield Installed(fleet, applied, helm)
    finally:
        fleet.stop()


def release(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    secrets = kube.list("v1", "Secret", namespace, selector=f"owner=helm,name={name},status=deployed")
    assert len(secrets) == 1, f"no deployed Helm release {namespace}/{name}"
    return dict(json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secrets[0]["data"]["release"])))))


def test_every_release_of_the_aks_plan_is_the_real_chart_with_our_values(installed: Installed) -> None:
    records = [r for r in offline_run("aks").records if r.type == HELM_RELEASE]
    assert sorted(r.inputs["name"] for r in records) == ["gpu-operator", "network-operator"]
    assert set(installed.helm.installed) == {"gpu-operator", "network-operator"}
    for rec in records:
        rel = release(installed.kube, rec.inputs["name"], rec.inputs["namespace"])
        assert rel["config"] == rec.inputs["values"], rec.name
        assert rel["chart"]["metadata"]["name"] == rec.inputs["chart"] and rel["chart"]["templates"]
        # Every object the chart rendered with the plan's values is in the API server.
        missing = []
        for doc in yaml.safe_load_all(rel["manifest"]):
            if not doc:
                continue
            meta = doc["metadata"]
            ns = meta.get("namespace") or rel["namespace"]
            got = installed.kube.get(doc["apiVersion"], doc["kind"], meta["name"], ns)
            if got is None and installed.kube.get(doc["apiVersion"], doc["kind"], meta["name"]) is None:
                missing.append(f"{doc['kind']} {meta['name']}")
        assert not missing, f"{rec.name}: {missing}"


def test_the_charts_and_our_workloads_are_ready_on_the_pools(installed: Installed) -> None:
    kube = installed.kube
    not_ready = []
    daemonsets = kube.list("apps/v1", "DaemonSet")
    for ds in daemonsets:
        st = ds.get("status") or {}
        if st.get("numberReady") != st.get("desiredNumberScheduled"):
            not_ready.append(f"DaemonSet {ds['metadata']['namespace']}/{ds['metadata']['name']}: {st}")
    deployments = kube.list("apps/v1", "Deployment")
    for dep in deployments:
        st = dep.get("status") or {}
        if st.get("readyReplicas") != dep["spec"].get("replicas", 1):
            not_ready.append(f"Deployment {dep['metadata']['namespace']}/{dep['metadata']['name']}: {st}")
    assert not not_ready, "\n".join(not_ready)
    names = {f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in deployments}
    assert {"nvidia-network-operator/network-operator", "gpu-operator/gpu-operator"} <= names, names
    # Every pod of the charts is placed and runs (or, a hook's, has run); none Pending.
    for ns in ("nvidia-network-operator", "gpu-operator"):
        for pod in kube.list("v1", "Pod", ns):
            phase = (pod.get("status") or {}).get("phase")
            assert pod["spec"].get("nodeName") and phase in ("Running", "Succeeded"), (pod["metadata"]["name"], phase)


def test_every_chart_daemonset_runs_on_exactly_its_nodes(installed: Installed) -> None:
    """Each DaemonSet the real charts render with the AKS plan's values (NFD's worker:
    tests/e2e/chart_daemonsets.py) has one Running pod on each node it is meant for: every pool's
    node, the ND pools' ``nvidia.com/gpu`` taint tolerated; none elsewhere, none Pending."""
    releases = {
        r.inputs["name"]: release(installed.kube, r.inputs["name"], r.inputs["namespace"])
        for r in offline_run("aks").records
        if r.type == HELM_RELEASE
    }
    chart_daemonsets.check("aks", installed.kube, fleet_nodes(CFG), releases)
