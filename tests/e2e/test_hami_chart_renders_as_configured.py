"""HAMi's real chart (2.10.0, ../shared/upstream/charts/hami-2.10.0) rendered by the real Helm with the
values the HAMi variant plan sends, and the result accepted by the real API server.

What the Release would install, checked object by object: the kube-scheduler image from
registry.k8s.io at the declared version, the certificate jobs' image, ClusterIP Services without
node ports, the webhook in front of HAMi teams' namespaces only (and failing open, so that
gpuaas-team-hami is what fails closed), the device plugin on HAMi nodes only, the renamed
resources in the scheduler's and device plugin's config, one scheduler replica. Then every
rendered object is sent to the API server as a dry-run create: the chart is valid for the version.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from components.model import hami, resources
from components.plan.offline import Run, run_program, stack_config
from e2e import helm_template
from e2e.controlplane import ControlPlane
from e2e.upstream import root as upstream_root
from tests.e2e.conftest import need_upstream
from tests.hami_cases import HAMI_STACK, hami_cfg

pytestmark = pytest.mark.every_minor

CHART = "charts/hami-2.10.0"


def plan_values(run: Run) -> dict[str, Any]:
    values: dict[str, Any] = run.named("gpuaas-hami-release").inputs["values"]
    return values


@pytest.fixture(scope="module")
def run() -> Run:
    return run_program("onprem", config=stack_config("onprem", HAMI_STACK))


@pytest.fixture(scope="module")
def rendered(run: Run, control_plane: ControlPlane) -> list[dict[str, Any]]:
    need_upstream()
    # At the control plane's own version: the Capabilities the chart sees on a real install.
    version = control_plane.version().lstrip("v")
    return helm_template.render(upstream_root() / CHART, hami.RELEASE, hami.NAMESPACE, plan_values(run), version)


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(d["kind"], d["metadata"]["name"]) for d in docs])
    return found[0]


def containers(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = doc["spec"]["template"]["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def test_the_scheduler_pod_runs_upstream_kube_scheduler_at_the_declared_version(rendered: list[dict[str, Any]]) -> None:
    dep = one(rendered, "Deployment", "hami-scheduler")
    images = {c["name"]: c["image"] for c in containers(dep)}
    declared = hami_cfg().platform.kubernetes_version
    assert images == {
        "kube-scheduler": f"registry.k8s.io/kube-scheduler:v{declared}",
        "vgpu-scheduler-extender": "docker.io/projecthami/hami:v2.10.0",
    }
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["template"]["metadata"]["labels"][hami.WEBHOOK_IGNORE_LABEL] == "ignore"


def test_no_image_comes_from_the_charts_mirror_or_a_personal_account(rendered: list[dict[str, Any]]) -> None:
    images = {c["image"] for d in rendered if d["kind"] in ("Deployment", "DaemonSet", "Job") for c in containers(d)}
    assert images == {
        f"registry.k8s.io/kube-scheduler:v{hami_cfg().platform.kubernetes_version}",
        "docker.io/projecthami/hami:v2.10.0",
        "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.6.9",
    }
    for job in ("hami-admission-create", "hami-admission-patch"):
        assert {c["image"] for c in containers(one(rendered, "Job", job))} == {
            "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.6.9"
        }


def test_services_are_cluster_ip_with_no_node_port(rendered: list[dict[str, Any]]) -> None:
    services = [d for d in rendered if d["kind"] == "Service"]
    assert {s["metadata"]["name"] for s in services} == {"hami-scheduler", "hami-device-plugin-monitor"}
    for s in services:
        assert s["spec"]["type"] == "ClusterIP"
        assert all("nodePort" not in p for p in s["spec"]["ports"]), s


def test_the_webhook_sees_hami_teams_namespaces_only_and_fails_open(rendered: list[dict[str, Any]]) -> None:
    (webhook,) = one(rendered, "MutatingWebhookConfiguration", "hami-webhook")["webhooks"]
    assert webhook["namespaceSelector"] == {
        "matchLabels": {resources.HAMI_LABEL: "true"},
        "matchExpressions": [{"key": hami.WEBHOOK_IGNORE_LABEL, "operator": "NotIn", "values": ["ignore"]}],
    }
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["rules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "*"}
    ]


def test_the_device_plugin_runs_on_hami_nodes_only(rendered: list[dict[str, Any]]) -> None:
    pod = one(rendered, "DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]
    # Exactly the labels every HAMi node carries (components/clusters/onprem_nodes.py), nothing else.
    assert pod["nodeSelector"] == resources.HAMI_NODE_LABELS
    assert pod["runtimeClassName"] == "nvidia"
    assert [c["name"] for c in pod["initContainers"]] == ["toolkit-validation"]  # waits for the Operator's toolkit


def test_hamis_components_use_the_renamed_resources(rendered: list[dict[str, Any]]) -> None:
    device = yaml.safe_load(one(rendered, "ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"])
    nvidia = device["nvidia"]
    assert (nvidia["resourceCountName"], nvidia["resourceMemoryName"], nvidia["resourceCoreName"]) == (
        resources.HAMI_GPU,
        resources.HAMI_MEMORY,
        resources.HAMI_CORES,
    )
    assert nvidia["resourceMemoryPercentageName"] == resources.HAMI_MEMORY_PERCENTAGE
    assert (nvidia["deviceSplitCount"], nvidia["deviceMemoryScaling"], nvidia["gpuCorePolicy"]) == (10, 1, "default")
    config = yaml.safe_load(one(rendered, "ConfigMap", "hami-scheduler")["data"]["config.yaml"])
    assert [p["schedulerName"] for p in config["profiles"]] == [hami.SCHEDULER_NAME]
    (extender,) = config["extenders"]
    managed = {m["name"] for m in extender["managedResources"] if m["ignoredByScheduler"]}
    assert set(resources.HAMI_RESOURCES) <= managed
    assert resources.GPU not in managed  # a whole GPU stays the default scheduler's and NVIDIA's plugin's


def test_the_scheduler_is_bound_to_kube_schedulers_role(rendered: list[dict[str, Any]]) -> None:
    crb = one(rendered, "ClusterRoleBinding", "hami-scheduler-kube")
    assert crb["roleRef"]["name"] == "system:kube-scheduler"
    sa = {"kind": "ServiceAccount", "name": hami.SCHEDULER_SERVICE_ACCOUNT, "namespace": hami.NAMESPACE}
    assert crb["subjects"] == [sa]


def test_every_rendered_object_is_accepted_by_the_api_server(
    rendered: list[dict[str, Any]], control_plane: ControlPlane, run: Run
) -> None:
    kube = control_plane.kube
    namespace = run.named("gpuaas-hami-namespace").inputs
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": namespace["metadata"]})
    for doc in rendered:
        kube.create(doc if "namespace" in doc["metadata"] or not _namespaced(kube, doc) else _in(doc), dry_run=True)


def _namespaced(kube: Any, doc: dict[str, Any]) -> bool:
    return bool(kube.resource(doc["apiVersion"], doc["kind"]).namespaced)


def _in(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "metadata": {**doc["metadata"], "namespace": hami.NAMESPACE}}
