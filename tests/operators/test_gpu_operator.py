"""GPU Operator: values derived from the config, checked against the pinned chart and CRD; our ConfigMaps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from components import platform_args
from components.loader import parse_config
from components.model import resources
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.operators.gpu_operator import (
    DEVICE_PLUGIN_CONFIGMAP,
    MIG_CONFIGMAP,
    device_plugin_configmap,
    device_plugin_configs,
    gpu_operator_values,
    mig_parted_configmap,
    namespace_manifest,
)
from components.plan.offline import Run
from tests.schema_helpers import GPU_OPERATOR_READ_NOT_LISTED, assert_value_paths_exist, missing_value_paths

GPU_OPERATOR = Path("gpu-operator/v26.7.0")
#: Kubernetes version whose OpenAPI schemas the rendered objects are validated against (AKS pin).
K8S_VERSION = "1.33.0"


def minimal(**extra: Any) -> dict[str, Any]:
    """The smallest on-prem stack: one plain H100 node group with one node."""
    raw: dict[str, Any] = {
        "platform": {
            "kind": "onprem",
            "kubernetesVersion": "1.37.2",
            "nodeGroups": [{"name": "gpus", "gpuModel": "H100-80GB"}],
            "nodes": [{"name": "node-1", "id": 1, "nodeGroup": "gpus"}],
        }
    }
    raw.update(extra)
    return raw


def custom() -> dict[str, Any]:
    """Every knob the GPU Operator reads set away from its default."""
    raw = minimal(
        versions={"gpuDriver": "580.126.20"},
        network={"ofedDriver": "host"},
        gpuOperator={
            "namespace": "nvidia-gpu",
            "migStrategy": "single",
            "gpudirect": "peermem",
            "driverEnabled": True,
            "helmTimeoutSeconds": 2400,
        },
    )
    raw["platform"]["nodeGroups"] = [
        {"name": "mig", "gpuModel": "A100-40GB", "mig": {"layout": "all-1g.5gb"}},
        {"name": "shared", "gpuModel": "H100-80GB", "timeSlicing": {"replicas": 4}},
    ]
    raw["platform"]["nodes"] = [
        {"name": "node-1", "id": 1, "nodeGroup": "mig"},
        {"name": "node-2", "id": 2, "nodeGroup": "shared"},
    ]
    return raw


# --------------------------------------------------------------------------------------------
# Snapshots: written out in full so that any change to the rendered values fails here.

DEFAULTS_VALUES = {
    "nfd": {"enabled": False},
    "operator": {"version": "v26.7.0"},
    "validator": {"version": "v26.7.0"},
    "nodeStatusExporter": {"version": "v26.7.0"},
    "driver": {"enabled": False, "rdma": {"enabled": False, "useHostMofed": False}, "kernelModuleType": "open"},
    "mig": {"strategy": "mixed"},
    "migManager": {"config": {"create": False, "name": "gpuaas-mig-parted-config", "default": "all-disabled"}},
    "devicePlugin": {"config": {"create": False, "name": "gpuaas-time-slicing-config", "default": "default"}},
}

CUSTOM_VALUES = {
    "nfd": {"enabled": False},
    "operator": {"version": "v26.7.0"},
    "validator": {"version": "v26.7.0"},
    "nodeStatusExporter": {"version": "v26.7.0"},
    "driver": {"enabled": True, "rdma": {"enabled": True, "useHostMofed": True}, "version": "580.126.20"},
    "mig": {"strategy": "single"},
    "migManager": {"config": {"create": False, "name": "gpuaas-mig-parted-config", "default": "all-disabled"}},
    "devicePlugin": {"config": {"create": False, "name": "gpuaas-time-slicing-config", "default": "default"}},
}

CUSTOM_MIG_CONFIG = """\
mig-configs:
  all-1g.5gb:
  - devices: all
    mig-devices:
      1g.5gb: 7
    mig-enabled: true
  all-disabled:
  - devices: all
    mig-enabled: false
version: v1
"""

CUSTOM_DEVICE_PLUGIN_DATA = {
    "default": "version: v1\nflags:\n  migStrategy: single\n",
    "mig": "version: v1\nflags:\n  migStrategy: single\n",
    "shared": (
        "version: v1\n"
        "flags:\n"
        "  migStrategy: single\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    renameByDefault: true\n"
        "    failRequestsGreaterThanOne: true\n"
        "    resources:\n"
        "    - name: nvidia.com/gpu\n"
        "      replicas: 4\n"
    ),
}


def test_defaults_snapshot() -> None:
    assert gpu_operator_values(platform_args.gpu_operator(parse_config(minimal()))) == DEFAULTS_VALUES


def test_custom_snapshot() -> None:
    cfg = parse_config(custom())
    assert gpu_operator_values(platform_args.gpu_operator(cfg)) == CUSTOM_VALUES
    assert mig_parted_configmap(platform_args.gpu_operator(cfg)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": MIG_CONFIGMAP,
            "namespace": "nvidia-gpu",
            "labels": {"app.kubernetes.io/part-of": "gpuaas"},
        },
        "data": {"config.yaml": CUSTOM_MIG_CONFIG},
    }
    assert device_plugin_configmap(platform_args.gpu_operator(cfg))["data"] == CUSTOM_DEVICE_PLUGIN_DATA


# --------------------------------------------------------------------------------------------
# Derivation table: (platform, ofedDriver, gpudirect) -> driver.enabled, rdma.enabled, useHostMofed, kernelModuleType


def aks_raw(**extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "platform": {
            "kind": "aks",
            "subscriptionId": "00000000-0000-0000-0000-000000000000",
            "location": "eastus",
            "resourceGroup": {"name": "rg"},
            "clusterName": "c",
            "gpuPools": [{"name": "ndh100"}],
        }
    }
    raw.update(extra)
    return raw


DERIVATION = [
    # platform, ofed,       gpudirect,  driver.enabled, rdma.enabled, useHostMofed, kernelModuleType
    ("onprem", "host", "dmabuf", False, False, False, "open"),
    ("onprem", "host", "peermem", False, True, True, None),
    ("onprem", "container", "dmabuf", False, False, False, "open"),
    ("onprem", "container", "peermem", False, True, False, None),
    ("aks", "host", "dmabuf", True, False, False, "open"),
    ("aks", "host", "peermem", True, True, True, None),
    ("aks", "container", "dmabuf", True, False, False, "open"),
    # Microsoft's AKS guide: rdma.enabled with the containerized DOCA driver, no useHostMofed.
    ("aks", "container", "peermem", True, True, False, None),
]


@pytest.mark.parametrize(
    ("platform", "ofed", "gpudirect", "driver", "rdma", "host_mofed", "kmt"),
    DERIVATION,
    ids=[f"{p}-{o}-{g}" for p, o, g, *_ in DERIVATION],
)
def test_driver_derivation(
    platform: str, ofed: str, gpudirect: str, driver: bool, rdma: bool, host_mofed: bool, kmt: str | None
) -> None:
    make = minimal if platform == "onprem" else aks_raw
    cfg = parse_config(make(network={"ofedDriver": ofed}, gpuOperator={"gpudirect": gpudirect}))
    values = gpu_operator_values(platform_args.gpu_operator(cfg))["driver"]
    assert values["enabled"] is driver
    assert values["rdma"] == {"enabled": rdma, "useHostMofed": host_mofed}
    assert values.get("kernelModuleType") == kmt


@pytest.mark.parametrize("platform", ["onprem", "aks"])
@pytest.mark.parametrize("enabled", [True, False])
def test_driver_enabled_override_wins(platform: str, enabled: bool) -> None:
    make = minimal if platform == "onprem" else aks_raw
    cfg = parse_config(make(gpuOperator={"driverEnabled": enabled}))
    assert gpu_operator_values(platform_args.gpu_operator(cfg))["driver"]["enabled"] is enabled


def test_driver_version_only_when_pinned() -> None:
    assert "version" not in gpu_operator_values(platform_args.gpu_operator(parse_config(minimal())))["driver"]
    cfg = parse_config(minimal(versions={"gpuDriver": "595.91.07"}))
    assert gpu_operator_values(platform_args.gpu_operator(cfg))["driver"]["version"] == "595.91.07"


# --------------------------------------------------------------------------------------------
# Against the pinned chart and CRD


def all_values(cfg_of: Callable[[str], StackConfig]) -> list[dict[str, Any]]:
    cfgs = [parse_config(minimal()), parse_config(custom()), cfg_of("onprem"), cfg_of("aks")]
    return [gpu_operator_values(platform_args.gpu_operator(c)) for c in cfgs]


def test_value_paths_exist_in_pinned_chart(upstream: Path, cfg_of: Callable[[str], StackConfig]) -> None:
    chart = upstream / "charts" / "gpu-operator-v26.7.0"
    for path, template in GPU_OPERATOR_READ_NOT_LISTED.items():
        assert f".Values.{path} | default .Chart.AppVersion" in (chart / template).read_text(), path
    # dcgmExporter.config is commented out in values.yaml; the chart's templates read its keys
    # (tests/observability/test_scrape.py checks them against templates/).
    read_not_listed = {**GPU_OPERATOR_READ_NOT_LISTED, "dcgmExporter.config": "templates/clusterpolicy.yaml"}
    for values in all_values(cfg_of):
        assert_value_paths_exist(values, upstream / GPU_OPERATOR / "values.yaml", read_not_listed)


def test_the_operators_images_are_the_release_not_the_charts_app_version(cfg_of: Callable[[str], StackConfig]) -> None:
    """The chart at its git tag says appVersion main-latest: our values pin the release's tag."""
    for values in all_values(cfg_of):
        assert values["operator"] == {"version": "v26.7.0"}
    onprem = gpu_operator_values(platform_args.gpu_operator(cfg_of("onprem")))
    assert onprem["validator"] == onprem["nodeStatusExporter"] == {"version": "v26.7.0"}
    unprefixed = parse_config(minimal(versions={"gpuOperatorChart": "26.7.0"}))
    assert gpu_operator_values(platform_args.gpu_operator(unprefixed))["operator"] == {"version": "v26.7.0"}


def test_value_path_helper_catches_typos(upstream: Path) -> None:
    chart = upstream / GPU_OPERATOR / "values.yaml"
    with pytest.raises(AssertionError, match=r"driver\.rdma\.useHostMOFED"):
        assert_value_paths_exist({"driver": {"rdma": {"useHostMOFED": True}}}, chart)
    chart_values = yaml.safe_load(chart.read_text())
    # A map where the chart has a scalar, and a top-level key the chart does not know.
    assert missing_value_paths({"mig": {"strategy": {"x": 1}}, "migStrategy": "mixed"}, chart_values) == [
        "mig.strategy.x",
        "migStrategy",
    ]
    # Below a free-form map (chart default {}) anything goes.
    assert missing_value_paths({"devicePlugin": {"config": {"data": {"any-key": "x"}}}}, chart_values) == []


def _crd_spec(upstream: Path) -> dict[str, Any]:
    crd = yaml.safe_load((upstream / GPU_OPERATOR / "crds/nvidia.com_clusterpolicies.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    spec: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


#: Values that the chart copies into ClusterPolicy ``spec`` unchanged (templates/clusterpolicy.yaml):
#: value path -> spec path. ``create`` is chart-only (whether Helm makes the ConfigMap).
CLUSTER_POLICY_PATHS = {
    ("mig", "strategy"): ("mig", "strategy"),
    ("driver", "enabled"): ("driver", "enabled"),
    ("driver", "kernelModuleType"): ("driver", "kernelModuleType"),
    ("driver", "version"): ("driver", "version"),
    ("driver", "rdma", "enabled"): ("driver", "rdma", "enabled"),
    ("driver", "rdma", "useHostMofed"): ("driver", "rdma", "useHostMofed"),
    ("migManager", "config", "name"): ("migManager", "config", "name"),
    ("migManager", "config", "default"): ("migManager", "config", "default"),
    ("devicePlugin", "config", "name"): ("devicePlugin", "config", "name"),
    ("devicePlugin", "config", "default"): ("devicePlugin", "config", "default"),
}


def _schema_at(spec: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = spec
    for key in path:
        assert key in node.get("properties", {}), f"ClusterPolicy spec has no {'.'.join(path)}"
        node = node["properties"][key]
    return node


def test_values_satisfy_cluster_policy_schema(upstream: Path, cfg_of: Callable[[str], StackConfig]) -> None:
    spec = _crd_spec(upstream)
    for values in all_values(cfg_of):
        for value_path, spec_path in CLUSTER_POLICY_PATHS.items():
            node: Any = values
            for key in value_path:
                node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                continue
            jsonschema.validate(node, _schema_at(spec, spec_path))


@pytest.mark.parametrize(
    ("spec_path", "bad"),
    [
        (("mig", "strategy"), "Mixed"),
        (("migManager", "config", "default"), "all-balanced"),
        (("driver", "kernelModuleType"), "opn"),
    ],
)
def test_cluster_policy_enums_refuse_what_we_never_render(upstream: Path, spec_path: tuple[str, ...], bad: str) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _schema_at(_crd_spec(upstream), spec_path))


# --------------------------------------------------------------------------------------------
# Our ConfigMaps


def test_mig_config_of_onprem_stack(cfg_of: Callable[[str], StackConfig]) -> None:
    config = yaml.safe_load(mig_parted_configmap(platform_args.gpu_operator(cfg_of("onprem")))["data"]["config.yaml"])
    assert config["version"] == "v1"
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert config["mig-configs"]["1x4g.40gb-3x1g.10gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "1g.10gb": 3}}
    ]
    assert set(config["mig-configs"]) == {"all-disabled", "1x4g.40gb-3x1g.10gb"}


def test_mig_config_bytes_do_not_depend_on_group_order() -> None:
    stack = minimal()
    stack["platform"]["nodeGroups"] = [
        {"name": "a", "gpuModel": "H100-80GB", "mig": {"profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}},
        {"name": "b", "gpuModel": "H100-80GB", "mig": {"layout": "all-balanced"}},
        {"name": "c", "gpuModel": "A30", "mig": {"layout": "all-1g.6gb"}},
        {"name": "d", "gpuModel": "H100-80GB"},
    ]
    stack["platform"]["nodes"] = [{"name": "node-1", "id": 1, "nodeGroup": "d"}]
    forward = mig_parted_configmap(platform_args.gpu_operator(parse_config(stack)))
    stack["platform"]["nodeGroups"].reverse()
    assert mig_parted_configmap(platform_args.gpu_operator(parse_config(stack))) == forward
    text = forward["data"]["config.yaml"]
    assert list(yaml.safe_load(text)["mig-configs"]) == [
        "2x1g.10gb-1x2g.20gb-1x3g.40gb",
        "all-1g.6gb",
        "all-balanced",
        "all-disabled",
    ]


def test_device_plugin_keys_are_groups_and_default(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    configs = device_plugin_configs(platform_args.gpu_operator(cfg))
    assert list(configs) == ["default", "h100-full", "h100-mig", "h100-shared"]
    assert all(c["version"] == "v1" and c["flags"] == {"migStrategy": "mixed"} for c in configs.values())
    assert [k for k, c in configs.items() if "sharing" in c] == ["h100-shared"]
    assert gpu_operator_values(platform_args.gpu_operator(cfg))["devicePlugin"]["config"]["default"] in configs


def test_time_slicing_is_advertised_as_the_quota_resource(cfg_of: Callable[[str], StackConfig]) -> None:
    ts = device_plugin_configs(platform_args.gpu_operator(cfg_of("onprem")))["h100-shared"]["sharing"]["timeSlicing"]
    (shared,) = ts["resources"]
    # renameByDefault advertises <name>.shared (k8s-device-plugin README): the name quotas use.
    assert ts["renameByDefault"] is True
    assert f"{shared['name']}.shared" == resources.GPU_SHARED
    assert shared["replicas"] == 2


def test_rendered_objects_are_valid_kubernetes(cfg_of: Callable[[str], StackConfig]) -> None:
    for cfg in (cfg_of("onprem"), cfg_of("aks"), parse_config(custom())):
        for obj in (
            namespace_manifest(cfg.gpu_operator.namespace),
            mig_parted_configmap(platform_args.gpu_operator(cfg)),
            device_plugin_configmap(platform_args.gpu_operator(cfg)),
        ):
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


# --------------------------------------------------------------------------------------------
# Rules the renderers rely on


def test_one_layout_name_means_one_layout() -> None:
    raw = minimal()
    raw["platform"]["nodeGroups"] = [
        {"name": "h100", "gpuModel": "H100-80GB", "mig": {"layout": "all-balanced"}},
        {"name": "h200", "gpuModel": "H200-141GB", "mig": {"layout": "all-balanced"}},
    ]
    raw["platform"]["nodes"] = [{"name": "n1", "id": 1, "nodeGroup": "h100"}]
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert [i.path for i in err.value.issues] == ["gpuaas:platform.nodeGroups[1].mig.layout"]
    assert "write mig.profiles" in err.value.issues[0].message


def test_a_time_sliced_group_may_not_be_named_default() -> None:
    raw = minimal()
    raw["platform"]["nodeGroups"] = [{"name": "default", "gpuModel": "H100-80GB", "timeSlicing": {"replicas": 2}}]
    raw["platform"]["nodes"] = [{"name": "n1", "id": 1, "nodeGroup": "default"}]
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert [i.path for i in err.value.issues] == ["gpuaas:platform.nodeGroups[0].name"]


# --------------------------------------------------------------------------------------------
# The component under the mock runtime


@pytest.mark.parametrize("stack_name", ["onprem", "aks"])
def test_component_registers_release_and_configmaps(
    stack_name: str, run_of: Callable[[str], Run], cfg_of: Callable[[str], StackConfig]
) -> None:
    run, cfg = run_of(stack_name), cfg_of(stack_name)
    component = run.named("gpuaas-gpu-operator")
    assert component.type == "gpuaas:index:GpuOperator"
    children = [r for r in run.records if r.parent == component.urn]
    assert sorted(r.name for r in children) == [
        "gpuaas-gpu-operator-device-plugin-config",
        "gpuaas-gpu-operator-mig-config",
        "gpuaas-gpu-operator-namespace",
        "gpuaas-gpu-operator-release",
    ]
    assert all(r.provider for r in children), "children must use the cluster's provider"
    release = run.named("gpuaas-gpu-operator-release")
    assert release.inputs["name"] == "gpu-operator"
    assert release.inputs["chart"] == "gpu-operator"
    assert release.inputs["version"] == cfg.versions.gpu_operator_chart
    assert release.inputs["repositoryOpts"] == {"repo": cfg.versions.helm_repository}
    assert release.inputs["namespace"] == cfg.gpu_operator.namespace
    assert release.inputs["timeout"] == cfg.gpu_operator.helm_timeout_seconds
    assert release.inputs["cleanupOnFail"] is True
    assert release.inputs["createNamespace"] is False
    assert release.inputs["values"] == gpu_operator_values(platform_args.gpu_operator(cfg))
    urn = {r.name: r.urn for r in children}
    assert {urn["gpuaas-gpu-operator-namespace"], urn["gpuaas-gpu-operator-mig-config"]} <= set(release.dependencies)
    assert urn["gpuaas-gpu-operator-device-plugin-config"] in release.dependencies
    # Slot 6 after slot 3: GPUDirect needs the NIC driver the NicClusterPolicy brings.
    (policy,) = run.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    assert policy.urn in release.dependencies
    mig = run.named("gpuaas-gpu-operator-mig-config")
    assert mig.inputs["metadata"]["name"] == MIG_CONFIGMAP
    assert mig.inputs["data"] == mig_parted_configmap(platform_args.gpu_operator(cfg))["data"]
    assert run.named("gpuaas-gpu-operator-device-plugin-config").inputs["metadata"]["name"] == DEVICE_PLUGIN_CONFIGMAP
