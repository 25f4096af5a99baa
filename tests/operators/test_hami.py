"""HAMi: its values against the real chart's values.yaml and templates, and what the variant stack plans.

The chart itself is rendered with these values by Helm in the e2e suite
(tests/e2e/test_hami_chart_renders_as_configured.py: Helm is a Go tool set); here every value path is
one the chart declares and one its templates read, and the plan of ``tests/stacks/onprem-hami.yaml``
holds HAMi's objects where they belong and nowhere else.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from components import platform_args
from components.clusters.nd_pools import autoscaler_tags, node_labels
from components.loader import parse_config
from components.model import hami, resources
from components.operators import hami as hami_operator
from components.operators.hami import hami_values
from components.plan.offline import Run, run_program, stack_config
from e2e.upstream import CheckedPath
from tests.conftest import offline_run, raw_stack
from tests.hami_cases import HAMI_STACK, hami_cfg, hami_raw
from tests.schema_helpers import assert_value_paths_exist, value_paths

CHART = "charts/hami-2.10.0"
_RUN: list[Run] = []


def hami_run() -> Run:
    if not _RUN:
        _RUN.append(run_program("onprem", config=stack_config("onprem", HAMI_STACK)))
    return _RUN[0]


def templates_text(upstream: CheckedPath) -> str:
    folder = upstream / CHART / "templates"
    names = [
        "_helpers.tpl",
        "_commons.tpl",
        *(f"scheduler/{n}" for n in ("deployment.yaml", "configmap.yaml", "device-configmap.yaml", "service.yaml")),
        "scheduler/webhook.yaml",
        "scheduler/job-patch/job-createSecret.yaml",
        "scheduler/job-patch/job-patchWebhook.yaml",
        *(f"device-plugin/{n}" for n in ("daemonsetnvidia.yaml", "monitorservice.yaml", "configmap.yaml")),
    ]
    return "\n".join((folder / n).read_text() for n in names)


# --------------------------------------------------------------------------------------------
# values against the chart


#: Maps the chart renders whole (toYaml), whose keys are ours to choose; the chart's own default
#: entries in them stay (Helm merges maps), which the rendering test checks.
FREE_FORM = (("devicePlugin", "nvidiaNodeSelector"),)


def test_every_value_path_is_in_the_charts_values(upstream: CheckedPath) -> None:
    values = copy.deepcopy(hami_values(platform_args.hami(hami_cfg())))
    for parent, key in FREE_FORM:
        values[parent][key] = {}
    assert_value_paths_exist(values, upstream / CHART / "values.yaml")


def test_every_value_is_read_by_a_template(upstream: CheckedPath) -> None:
    """The path, or the map it sits in (rendered whole with toYaml, or an image dict handed to a
    helper), appears as ``.Values.<path>`` in the templates: a value no template reads is a no-op."""
    text = templates_text(upstream)
    unread = []
    for path in value_paths(hami_values(platform_args.hami(hami_cfg()))):
        candidates = [".".join(path), ".".join(path[:-1])]
        if not any(re.search(rf"\.Values\.{re.escape(c)}\b", text) for c in candidates if c):
            unread.append(".".join(path))
    assert not unread, unread


def test_the_values_say_what_the_module_docstring_promises() -> None:
    cfg = hami_cfg()
    v = hami_values(platform_args.hami(cfg))
    assert v["resourceName"] == resources.HAMI_GPU != resources.GPU
    assert (v["resourceMem"], v["resourceCores"]) == (resources.HAMI_MEMORY, resources.HAMI_CORES)
    scheduler = v["scheduler"]
    assert scheduler["kubeScheduler"]["image"] == {
        "registry": "registry.k8s.io",
        "repository": "kube-scheduler",
        "tag": "v1.37.2",  # the stack's declared platform.kubernetesVersion
    }
    certgen = {"registry": "registry.k8s.io", "repository": "ingress-nginx/kube-webhook-certgen", "tag": "v1.6.9"}
    assert scheduler["patch"] == {"image": certgen, "imageNew": certgen}
    assert scheduler["service"] == {"type": "ClusterIP"} == v["devicePlugin"]["service"]
    assert scheduler["admissionWebhook"] == {
        "failurePolicy": "Ignore",
        "namespaceSelector": {"matchLabels": {resources.HAMI_LABEL: "true"}},
    }
    assert scheduler["replicas"] == 1
    assert v["devicePlugin"]["nvidiaNodeSelector"] == {"gpu": "on", resources.HAMI_LABEL: "true"}
    assert v["devicePlugin"]["deviceSplitCount"] == 10 and v["devicePlugin"]["deviceMemoryScaling"] == 1.0
    assert v["devices"] == {"nvidia": {"gpuCorePolicy": "default"}}
    # On-prem the driver is on the host: HAMi's driver root stays the chart's (the host's /).
    assert "nvidiaDriverRoot" not in v["devicePlugin"]


@pytest.mark.parametrize(
    ("repository", "expected"),
    [
        ("docker.io/projecthami/hami", ("docker.io", "projecthami/hami")),
        ("registry.k8s.io/kube-scheduler", ("registry.k8s.io", "kube-scheduler")),
        ("mirror.example.com:5000/hami", ("mirror.example.com:5000", "hami")),
        ("localhost/hami", ("localhost", "hami")),
        ("projecthami/hami", ("", "projecthami/hami")),
    ],
)
def test_an_image_repository_splits_as_a_runtime_reads_it(repository: str, expected: tuple[str, str]) -> None:
    got = hami_operator.image(repository, "v1")
    assert (got["registry"], got["repository"], got["tag"]) == (*expected, "v1")


# --------------------------------------------------------------------------------------------
# the variant stack's plan


def test_the_variant_stack_plans_hamis_release_namespace_and_rbac() -> None:
    run, cfg = hami_run(), hami_cfg()
    release = run.named("gpuaas-hami-release").inputs
    assert (release["name"], release["namespace"], release["chart"], release["version"]) == (
        hami.RELEASE,
        hami.NAMESPACE,
        "hami",
        "2.10.0",
    )
    assert release["repositoryOpts"] == {"repo": "https://project-hami.github.io/HAMi/"}
    assert release["values"] == hami_values(platform_args.hami(cfg))
    ns = run.named("gpuaas-hami-namespace").inputs["metadata"]
    assert ns["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert ns["labels"][hami.WEBHOOK_IGNORE_LABEL] == "ignore"
    role = run.named("gpuaas-hami-dra-read-role").inputs
    assert role["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["deviceclasses", "devicetaintrules", "resourceclaims", "resourceslices"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = run.named("gpuaas-hami-dra-read-binding").inputs
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "hami-scheduler", "namespace": hami.NAMESPACE}]


def test_hamis_release_waits_for_the_gpu_operator_and_the_node_labels() -> None:
    run = hami_run()
    deps = set(run.named("gpuaas-hami-release").dependencies)
    assert run.named("gpuaas-gpu-operator-release").urn in deps
    assert {r.urn for r in run.of_type("kubernetes:core/v1:NodePatch")} <= deps


def _node_labels(run: Run) -> dict[str, dict[str, str]]:
    patches = run.of_type("kubernetes:core/v1:NodePatch")
    return {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"] for r in patches}


def test_hami_nodes_turn_the_operators_device_plugin_and_mig_manager_off() -> None:
    labels = _node_labels(hami_run())
    hami_node = labels.pop("gpu-node-06")
    assert hami_node[resources.NODE_GROUP_LABEL] == "h100-hami"
    assert {k: hami_node[k] for k in (*resources.HAMI_NODE_LABELS, resources.GPU_DEPLOY_DEVICE_PLUGIN_LABEL)} == {
        "gpu": "on",
        resources.HAMI_LABEL: "true",
        resources.GPU_DEPLOY_DEVICE_PLUGIN_LABEL: "false",
    }
    assert hami_node[resources.GPU_DEPLOY_MIG_MANAGER_LABEL] == "false"
    assert hami_node[resources.MIG_CONFIG_LABEL] == "all-disabled"
    for node, other in labels.items():
        assert not set(other) & {*resources.HAMI_NODE_LABELS, resources.GPU_DEPLOY_DEVICE_PLUGIN_LABEL}, node


def _namespaces(run: Run) -> dict[str, dict[str, str]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels", {})
        for r in run.of_type("kubernetes:core/v1:Namespace")
    }


def test_only_the_namespaces_of_teams_that_may_use_slices_are_in_hamis_webhooks_sight() -> None:
    """With HAMi quota, or able to borrow slices (elastic); vision's queue holds whole GPUs only."""
    run = hami_run()
    labelled = {n for n, labels in _namespaces(run).items() if labels.get(resources.HAMI_LABEL) == "true"}
    may = {ns for ns, hard in _hard(run).items() if hard[f"requests.{resources.HAMI_GPU}"] != "0"}
    assert labelled == may
    assert {"inference", "platform-qa"} <= labelled and "vision" not in labelled


def test_kueue_counts_memory_and_cores_per_slice_times_slices() -> None:
    values = hami_run().named("gpuaas-queues-kueue").inputs["values"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["resources"] == {
        "excludeResourcePrefixes": ["ephemeral-storage", "hugepages-", resources.HAMI_PRIORITY],
        "transformations": [
            {
                "input": r,
                "strategy": "Replace",
                "multiplyBy": resources.HAMI_GPU,
                "outputs": {r: "1"},
            }
            for r in (resources.HAMI_MEMORY, resources.HAMI_CORES)
        ],
    }


def _hami_objects(run: Run) -> Iterator[str]:
    for r in run.records:
        text = str(r.inputs)
        if "hami" in r.name or "nvidia.com/vgpu" in text or resources.HAMI_LABEL in text:
            yield r.name


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_the_checked_in_stacks_plan_nothing_of_hami(stack: str) -> None:
    cfg = parse_config(raw_stack(stack))
    assert not hami.uses_hami(cfg)
    # The queue guards name HAMi's slices among the GPU kinds (one CEL text for every stack).
    names = [n for n in _hami_objects(offline_run(stack)) if "queue" not in n]
    assert names == [], names


def test_an_aks_hami_pool_tolerates_its_taints_and_brings_the_operators_driver_root() -> None:
    raw = raw_stack("aks")
    raw["platform"]["gpuPools"].append(
        {
            "name": "ndhami",
            "vmSize": "Standard_ND96isr_H100_v5",
            "minCount": 2,
            "maxCount": 2,
            "hami": {},
            "taints": ["sku=gpu:NoSchedule"],
        }
    )
    cfg = parse_config(raw)
    v = hami_values(platform_args.hami(cfg))
    toleration = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    assert v["devicePlugin"]["tolerations"] == [toleration]
    assert v["devicePlugin"]["nvidiaDriverRoot"] == hami_operator.OPERATOR_DRIVER_ROOT
    # The AKS default version (components/model/versions.py).
    assert v["scheduler"]["kubeScheduler"]["image"]["tag"] == "v1.36.3"
    # kube-scheduler 1.36 watches resource.k8s.io (DRA is GA from 1.34): the read rules 2.10.0 lacks.
    assert set(hami_operator.hami_objects(platform_args.hami(cfg))) == {
        "namespace",
        "dra-read-role",
        "dra-read-binding",
    }
    pool = cfg.aks.pools_by_name["ndhami"]  # type: ignore[union-attr]
    labels = node_labels(cfg, pool)
    assert {k: labels[k] for k in resources.HAMI_NODE_LABELS} == dict(resources.HAMI_NODE_LABELS)
    assert labels[resources.GPU_DEPLOY_DEVICE_PLUGIN_LABEL] == "false"
    # The autoscaler's template node advertises what a HAMi node does: 8 GPUs x 10 slices, no memory.
    tags = {k.rsplit("_", 2)[-2:][0] + "/" + k.rsplit("_", 1)[-1]: v for k, v in autoscaler_tags(cfg, pool).items()}
    assert tags.get("nvidia.com/vgpu") == "80" and not [t for t in tags if "vgpu-" in t], tags


def _hard(run: Run) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
        for r in run.of_type("kubernetes:core/v1:ResourceQuota")
        if r.inputs["metadata"]["name"] == "gpuaas-team-quota"
    }


def test_a_team_quota_renders_the_keys_both_enforcers_read() -> None:
    hard = _hard(hami_run())["vision"]
    # A team that can have no slice: every HAMi key 0 for the quota controller and for HAMi.
    assert {k: v for k, v in hard.items() if "vgpu" in k} == {
        "limits.nvidia.com/vgpu-cores": "0",
        "limits.nvidia.com/vgpu-memory": "0",
        "requests.nvidia.com/vgpu": "0",
        "requests.nvidia.com/vgpu-cores": "0",
        "requests.nvidia.com/vgpu-memory": "0",
        "requests.nvidia.com/vgpu-memory-percentage": "0",
    }
    assert parse_config(hami_raw()).queues.elastic
