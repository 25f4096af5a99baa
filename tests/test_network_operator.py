"""Network Operator: Helm values against the pinned chart, its namespace, and the release under mocks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components.network_operator import (
    POD_SECURITY_LABELS,
    RELEASE,
    namespace,
    network_operator_values,
    node_affinity,
    tolerations,
)
from components.offline import Run
from tests.network_cases import K8S_VERSION, NETWORK_OPERATOR, aks, custom, defaults
from tests.schema_helpers import assert_value_paths_exist, missing_value_paths

# --------------------------------------------------------------------------------------------
# Snapshots

DEFAULTS_VALUES = {
    "nfd": {"enabled": True, "deployNodeFeatureRules": True},
    "operator": {"admissionController": {"enabled": False}, "cniNetworkDirectory": "/etc/cni/net.d"},
}
#: The custom stack's nodes keep CNI confs in /var/lib/cni/conf (platform.multus.cniConfDir).
CUSTOM_VALUES = {
    "nfd": {"enabled": True, "deployNodeFeatureRules": False},
    "operator": {"admissionController": {"enabled": False}, "cniNetworkDirectory": "/var/lib/cni/conf"},
}
DEFAULTS_NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": "nvidia-network-operator",
        "labels": {
            "app.kubernetes.io/part-of": "gpuaas",
            "pod-security.kubernetes.io/enforce": "privileged",
            "pod-security.kubernetes.io/audit": "privileged",
            "pod-security.kubernetes.io/warn": "privileged",
        },
    },
}


def test_defaults_snapshot() -> None:
    cfg = defaults()
    assert network_operator_values(cfg) == DEFAULTS_VALUES
    assert namespace(cfg) == DEFAULTS_NAMESPACE


def test_custom_snapshot() -> None:
    cfg = custom()
    assert network_operator_values(cfg) == CUSTOM_VALUES
    assert namespace(cfg)["metadata"]["name"] == "nvnet"
    assert node_affinity(cfg.network) == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "gpuaas.io/rdma", "operator": "In", "values": ["true"]},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    ]
                }
            ]
        }
    }
    assert tolerations(cfg.network) == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ib"},
    ]


def test_aks_turns_the_nfd_rules_off_like_the_guide() -> None:
    # Azure/aks-rdma-infiniband configs/values/network-operator/values.yaml: deployNodeFeatureRules: false
    assert network_operator_values(aks(deployNodeFeatureRules=False))["nfd"]["deployNodeFeatureRules"] is False


# --------------------------------------------------------------------------------------------
# Against the pinned chart


@pytest.mark.parametrize("case", [defaults, custom, aks])
def test_value_paths_exist_in_pinned_chart(upstream: Path, case: Callable[[], Any]) -> None:
    assert_value_paths_exist(network_operator_values(case()), upstream / NETWORK_OPERATOR / "values.yaml")


@pytest.mark.parametrize(
    "typo",
    [
        {"operator": {"admissionController": {"enable": False}}},  # the maintenance-operator spelling
        {"operator": {"admissionControllers": {"enabled": False}}},  # the sriov-network-operator spelling
        {"nfd": {"deployNodeFeatureRule": True}},
    ],
)
def test_a_misspelt_value_path_fails(upstream: Path, typo: dict[str, Any]) -> None:
    import yaml

    chart = yaml.safe_load((upstream / NETWORK_OPERATOR / "values.yaml").read_text())
    assert missing_value_paths(typo, chart)


def test_admission_webhook_key_is_the_charts_and_off_by_default(upstream: Path) -> None:
    """We write the chart default out; make sure it is the chart's key and the chart's default."""
    import yaml

    chart = yaml.safe_load((upstream / NETWORK_OPERATOR / "values.yaml").read_text())
    assert chart["operator"]["admissionController"]["enabled"] is False
    assert network_operator_values(defaults())["operator"]["admissionController"] == {"enabled": False}


def test_namespace_is_valid_kubernetes() -> None:
    for cfg in (defaults(), custom()):
        kubernetes_validate.validate(namespace(cfg), K8S_VERSION, strict=True)


def test_namespace_is_privileged_for_the_node_daemonsets() -> None:
    labels = namespace(defaults())["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert POD_SECURITY_LABELS.items() <= labels.items()


# --------------------------------------------------------------------------------------------
# Under mocks: the checked-in on-prem stack


def test_release_arguments(run_of: Callable[[str], Run], cfg_of: Callable[[str], Any]) -> None:
    run, cfg = run_of("onprem"), cfg_of("onprem")
    release = run.named("gpuaas-network-operator-release")
    assert release.type == "kubernetes:helm.sh/v3:Release"
    inputs = release.inputs
    assert inputs["name"] == RELEASE
    assert inputs["chart"] == "network-operator"
    assert inputs["version"] == cfg.versions.network_operator_chart
    assert inputs["repositoryOpts"] == {"repo": cfg.versions.helm_repository}
    assert inputs["namespace"] == cfg.network.namespace
    assert inputs["timeout"] == cfg.network.helm_timeout_seconds
    assert inputs["cleanupOnFail"] is True
    assert inputs["atomic"] is False
    assert inputs["createNamespace"] is False
    assert inputs["values"] == network_operator_values(cfg)


def test_component_parenting_names_and_order(run_of: Callable[[str], Run]) -> None:
    run = run_of("onprem")
    component = run.named("gpuaas-network-operator")
    assert component.type == "gpuaas:index:NetworkOperator"
    assert component.parent == run.named("gpuaas").urn
    ns = run.named("gpuaas-network-operator-namespace")
    release = run.named("gpuaas-network-operator-release")
    assert ns.parent == component.urn and release.parent == component.urn
    assert ns.inputs["metadata"]["name"] == "nvidia-network-operator"
    assert ns.urn in release.dependencies
    # The Platform's kubernetes provider reaches both children through the component.
    provider = run.named("gpuaas-k8s")
    assert ns.provider.startswith(provider.urn) and release.provider.startswith(provider.urn)


NETWORK_COMPONENTS = {
    "gpuaas:index:NetworkOperator",
    "gpuaas:index:NicClusterPolicy",
    "gpuaas:index:IbNodeConfig",
    "gpuaas:index:RdmaSharedDevicePlugin",
}


@pytest.mark.parametrize("stack_name", ["onprem", "aks"])
def test_every_network_child_is_parented_prefixed_and_named(run_of: Callable[[str], Run], stack_name: str) -> None:
    run = run_of(stack_name)
    platform = run.named("gpuaas")
    components = [r for r in run.records if r.type in NETWORK_COMPONENTS]
    assert {c.type for c in components} >= NETWORK_COMPONENTS - {"gpuaas:index:RdmaSharedDevicePlugin"}
    for component in components:
        assert component.parent == platform.urn
        children = [r for r in run.records if r.parent == component.urn]
        assert children, f"{component.name} registered nothing"
        for child in children:
            assert child.name.startswith(f"{component.name}-"), child.name
            if child.type == "kubernetes:helm.sh/v3:Release":
                assert child.inputs["name"], f"{child.name}: Helm would generate a release name"
            else:
                assert child.inputs["metadata"]["name"], f"{child.name}: Pulumi would auto-name it"


def test_ib_sriov_cni_is_onprem_only(run_of: Callable[[str], Run]) -> None:
    assert run_of("onprem").named("gpuaas-nic-cluster-policy-ib-sriov-cni")
    assert not [r for r in run_of("aks").records if r.name.endswith("ib-sriov-cni")]
