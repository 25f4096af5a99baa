"""RDMA shared device plugin: one source per cluster (policy section xor standalone), config and objects."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from jsonschema import Draft4Validator

from components import platform_args
from components.loader import parse_config
from components.model.config import StackConfig
from components.operators.nic_cluster_policy import nic_cluster_policy
from components.operators.rdma_shared_device_plugin import (
    CONNECTX_VF_DEVICE_IDS,
    RdmaSharedDevicePlugin,
    RdmaSharedDevicePluginArgs,
    config_map,
    daemonset,
    plugin_config,
    plugin_config_json,
    resource,
)
from components.plan.offline import Run, run_program
from tests.conftest import qualified, raw_stack
from tests.network_cases import K8S_VERSION, WEBHOOK_SCHEMAS, aks, custom, defaults

#: On-prem stacks with SR-IOV partitions: the shared plugin pools ConnectX PFs only, never team VFs.
ONPREM_PF_SELECTORS = {
    "vendors": ["15b3"],
    "drivers": ["mlx5_core"],
    "linkTypes": ["infiniband"],
    "deviceIDs": ["1013", "1017", "1019", "101b", "1021", "1023", "1025", "a2dc"],
}

# --------------------------------------------------------------------------------------------
# Snapshots

DEFAULTS_CONFIG = {
    "configList": [
        {
            "resourcePrefix": "rdma",
            "resourceName": "hcashared",
            "rdmaHcaMax": 1000,
            "selectors": ONPREM_PF_SELECTORS,
        }
    ]
}
CUSTOM_CONFIG = {
    "configList": [
        {
            "resourcePrefix": "rdma",
            "resourceName": "shared_ib",
            "rdmaHcaMax": 63,
            "selectors": ONPREM_PF_SELECTORS,
        }
    ]
}
LABELS = {"app.kubernetes.io/name": "rdma-shared-dp-ds", "app.kubernetes.io/part-of": "gpuaas"}


def _args(cfg: StackConfig) -> RdmaSharedDevicePluginArgs:
    """The plugin's arguments as the Platform maps ``cfg``."""
    return platform_args.rdma_shared_device_plugin(cfg)


def defaults_daemonset(digest: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "rdma-shared-dp-ds", "namespace": "nvidia-network-operator", "labels": LABELS},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "rdma-shared-dp-ds"}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": LABELS, "annotations": {"gpuaas.io/config-sha256": digest}},
                "spec": {
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": {"feature.node.kubernetes.io/pci-15b3.present": "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "k8s-rdma-shared-dp-ds",
                            "image": "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3",
                            "imagePullPolicy": "IfNotPresent",
                            "securityContext": {"privileged": True},
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "64Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                            "volumeMounts": [
                                {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                                {"name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry"},
                                {"name": "config", "mountPath": "/k8s-rdma-shared-dev-plugin", "readOnly": True},
                                {"name": "devs", "mountPath": "/dev/"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
                        {"name": "plugins-registry", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}},
                        {
                            "name": "config",
                            "configMap": {
                                "name": "rdma-devices",
                                "items": [{"key": "config.json", "path": "config.json"}],
                            },
                        },
                        {"name": "devs", "hostPath": {"path": "/dev/"}},
                    ],
                },
            },
        },
    }


def _digest(cfg: StackConfig) -> str:
    import hashlib

    return hashlib.sha256(
        plugin_config_json(cfg.network, physical_functions_only=_args(cfg).physical_functions_only).encode()
    ).hexdigest()


def test_defaults_snapshot() -> None:
    cfg = defaults()
    assert plugin_config(cfg.network, physical_functions_only=_args(cfg).physical_functions_only) == DEFAULTS_CONFIG
    assert (
        plugin_config_json(cfg.network, physical_functions_only=_args(cfg).physical_functions_only)
        == json.dumps(DEFAULTS_CONFIG, indent=2) + "\n"
    )
    assert config_map(_args(cfg)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "rdma-devices",
            "namespace": "nvidia-network-operator",
            "labels": {"app.kubernetes.io/part-of": "gpuaas"},
        },
        "data": {"config.json": json.dumps(DEFAULTS_CONFIG, indent=2) + "\n"},
    }
    assert daemonset(_args(cfg)) == defaults_daemonset(_digest(cfg))
    assert resource(cfg.network) == "rdma/hcashared"


def test_custom_snapshot() -> None:
    cfg = custom()
    assert plugin_config(cfg.network, physical_functions_only=_args(cfg).physical_functions_only) == CUSTOM_CONFIG
    expected = defaults_daemonset(_digest(cfg))
    expected["metadata"]["namespace"] = "nvnet"
    pod = expected["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"gpuaas.io/rdma": "true", "kubernetes.io/arch": "amd64"}
    pod["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ib"},
    ]
    pod["containers"][0]["image"] = "mirror.example.com/k8s-rdma-shared-dev-plugin:v1.5.2"
    assert daemonset(_args(cfg)) == expected
    assert resource(cfg.network) == "rdma/shared_ib"


def test_aks_shares_each_hca_1000_ways() -> None:
    assert (
        plugin_config(
            aks(rdmaSharedDevicePlugin="standalone").network,
            physical_functions_only=_args(aks(rdmaSharedDevicePlugin="standalone")).physical_functions_only,
        )["configList"][0]["rdmaHcaMax"]
        == 1000
    )


def test_policy_and_standalone_carry_the_same_config() -> None:
    cfg = custom()
    section = nic_cluster_policy(platform_args.nic_cluster_policy(cfg))["spec"]["rdmaSharedDevicePlugin"]
    assert section["config"] == config_map(_args(cfg))["data"]["config.json"]


# --------------------------------------------------------------------------------------------
# Schemas


@pytest.mark.parametrize("case", [defaults, custom], ids=["defaults", "custom"])
def test_config_passes_the_webhook_schema(upstream: Path, case: Callable[[], StackConfig]) -> None:
    schema = json.loads((upstream / WEBHOOK_SCHEMAS / "rdma_shared_device_plugin.json").read_text())
    assert [
        e.message
        for e in Draft4Validator(schema).iter_errors(
            plugin_config(case().network, physical_functions_only=_args(case()).physical_functions_only)
        )
    ] == []


def test_upstream_example_config_keys_are_the_ones_we_use(upstream: Path) -> None:
    """Our top-level/entry keys are a subset of what the plugin's own example ConfigMap uses."""
    import yaml

    example = yaml.safe_load(
        (upstream / "k8s-rdma-shared-dev-plugin/v1.5.3/deployment/k8s/base/configmap.yaml").read_text()
    )
    upstream_config = json.loads(example["data"]["config.json"])
    upstream_entry_keys = {k for entry in upstream_config["configList"] for k in entry} | {"resourcePrefix"}
    ours = plugin_config(defaults().network, physical_functions_only=_args(defaults()).physical_functions_only)
    assert set(ours) <= set(upstream_config)
    assert {k for entry in ours["configList"] for k in entry} <= upstream_entry_keys


@pytest.mark.parametrize("case", [defaults, custom], ids=["defaults", "custom"])
def test_objects_are_valid_kubernetes(case: Callable[[], StackConfig]) -> None:
    cfg = case()
    kubernetes_validate.validate(config_map(_args(cfg)), K8S_VERSION, strict=True)
    kubernetes_validate.validate(daemonset(_args(cfg)), K8S_VERSION, strict=True)


def test_a_config_change_rerolls_the_plugin() -> None:
    def annotation(cfg: StackConfig) -> str:
        return str(daemonset(_args(cfg))["spec"]["template"]["metadata"]["annotations"]["gpuaas.io/config-sha256"])

    assert annotation(defaults()) != annotation(custom())


# --------------------------------------------------------------------------------------------
# One source per cluster, never both — rendered and registered

MODES = ["nic-cluster-policy", "standalone", "none"]
STANDALONE_TYPES = {"kubernetes:core/v1:ConfigMap", "kubernetes:apps/v1:DaemonSet"}


def _run(stack: str, mode: str) -> Run:
    raw = raw_stack(stack)
    raw["network"] = {**raw.get("network", {}), "rdmaSharedDevicePlugin": mode}
    if mode == "none":
        # Without the plugin the fleet has no rdma/* capacity; the quota rule would refuse the
        # AKS teams' rdma quotas (that rule is tested in test_config_rules.py).
        raw["quotaPolicy"] = {"allowOversubscription": True}
        raw.setdefault("queues", {})["elastic"] = False  # hard quotas: elastic ones refuse oversubscription
    return run_program(stack, config=qualified(raw))


def _standalone_objects(run: Run) -> list[str]:
    return [
        r.inputs["metadata"]["name"]
        for r in run.records
        if r.type in STANDALONE_TYPES and r.inputs["metadata"]["name"] in ("rdma-devices", "rdma-shared-dp-ds")
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stack_name", ["onprem", "aks"])
def test_exactly_one_source(stack_name: str, mode: str) -> None:
    run = _run(stack_name, mode)
    policy = run.named("gpuaas-nic-cluster-policy-policy")
    in_policy = "rdmaSharedDevicePlugin" in policy.inputs["spec"]
    standalone = _standalone_objects(run)
    components = run.of_type("gpuaas:index:RdmaSharedDevicePlugin")
    assert in_policy == (mode == "nic-cluster-policy")
    assert bool(standalone) == bool(components) == (mode == "standalone")
    if mode == "standalone":
        assert sorted(standalone) == ["rdma-devices", "rdma-shared-dp-ds"]
    assert not (in_policy and standalone), "two RDMA shared device plugins would register one resource twice"


def test_checked_in_aks_stack_uses_the_standalone_plugin_after_the_policy(run_of: Callable[[str], Run]) -> None:
    run = run_of("aks")
    component = run.named("gpuaas-rdma-shared-device-plugin")
    assert component.parent == run.named("gpuaas").urn
    policy = run.named("gpuaas-nic-cluster-policy-policy")
    assert "rdmaSharedDevicePlugin" not in policy.inputs["spec"]
    cm = run.named("gpuaas-rdma-shared-device-plugin-config")
    ds = run.named("gpuaas-rdma-shared-device-plugin-daemonset")
    assert cm.parent == component.urn and ds.parent == component.urn
    assert cm.inputs["metadata"]["name"] == "rdma-devices"
    assert ds.inputs["metadata"]["name"] == "rdma-shared-dp-ds"
    assert policy.urn in cm.dependencies and policy.urn in ds.dependencies
    assert cm.urn in ds.dependencies


def test_component_refuses_the_non_standalone_modes() -> None:
    cfg = defaults()
    assert cfg.network.rdma_shared_device_plugin == "nic-cluster-policy"
    errors: list[BaseException] = []

    def program() -> None:
        try:
            RdmaSharedDevicePlugin("rdma", platform_args.rdma_shared_device_plugin(cfg))
        except ValueError as e:
            errors.append(e)

    run_program("onprem", program=program)
    assert errors and "standalone" in str(errors[0])


def test_team_vfs_never_join_the_shared_pool() -> None:
    """A VF in the shared pool would give any pod its partition's GUID, past quota and NAD."""
    with_partitions = plugin_config(
        defaults().network, physical_functions_only=_args(defaults()).physical_functions_only
    )["configList"][0]["selectors"]
    assert set(with_partitions["deviceIDs"]).isdisjoint(CONNECTX_VF_DEVICE_IDS)
    # ConnectX-5 (EDR) and ConnectX-7 (NDR) PFs are common on-prem: both stay in the pool.
    assert {"1017", "1021"} <= set(with_partitions["deviceIDs"])
    raw = raw_stack("onprem")
    raw["teams"] = [{"name": "interns"}]
    del raw["platform"]["multus"]
    raw["network"]["rdmaSharedDevicePlugin"] = "nic-cluster-policy"
    assert (
        "deviceIDs"
        not in plugin_config(
            parse_config(raw).network, physical_functions_only=_args(parse_config(raw)).physical_functions_only
        )["configList"][0]["selectors"]
    )
    # AKS: the VM's HCAs are VFs themselves; filtering them out would leave nothing to share.
    assert (
        "deviceIDs"
        not in plugin_config(aks().network, physical_functions_only=_args(aks()).physical_functions_only)["configList"][
            0
        ]["selectors"]
    )
