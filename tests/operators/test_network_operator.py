"""Network Operator: Helm values against the pinned chart, its namespace, and the release under mocks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components import platform_args
from components.k8s import Manifest, tolerations
from components.model.config import StackConfig
from components.operators.network_operator import (
    MELLANOX_LABEL,
    POD_SECURITY_LABELS,
    RELEASE,
    namespace,
    network_operator_values,
    node_affinity,
    node_feature_rule,
)
from components.plan.offline import Run
from tests.network_cases import K8S_VERSION, NETWORK_OPERATOR, aks, aks_raw, custom, defaults
from tests.schema_helpers import assert_value_paths_exist, missing_value_paths, validate_against_crd


def _rule(cfg: StackConfig) -> Manifest | None:
    """The NodeFeatureRule of ``cfg``'s Network Operator arguments."""
    args = platform_args.network_operator(cfg)
    return node_feature_rule(args.network, azure_vfs=args.azure_vfs)


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
    assert network_operator_values(platform_args.network_operator(cfg)) == DEFAULTS_VALUES
    assert namespace(cfg.network) == DEFAULTS_NAMESPACE


def test_custom_snapshot() -> None:
    cfg = custom()
    assert network_operator_values(platform_args.network_operator(cfg)) == CUSTOM_VALUES
    assert namespace(cfg.network)["metadata"]["name"] == "nvnet"
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
    assert (
        network_operator_values(platform_args.network_operator(aks(deployNodeFeatureRules=False)))["nfd"][
            "deployNodeFeatureRules"
        ]
        is False
    )


# --------------------------------------------------------------------------------------------
# Against the pinned chart


@pytest.mark.parametrize("case", [defaults, custom, aks])
def test_value_paths_exist_in_pinned_chart(upstream: Path, case: Callable[[], Any]) -> None:
    assert_value_paths_exist(
        network_operator_values(platform_args.network_operator(case())), upstream / NETWORK_OPERATOR / "values.yaml"
    )


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
    assert network_operator_values(platform_args.network_operator(defaults()))["operator"]["admissionController"] == {
        "enabled": False
    }


def test_namespace_is_valid_kubernetes() -> None:
    for cfg in (defaults(), custom()):
        kubernetes_validate.validate(namespace(cfg.network), K8S_VERSION, strict=True)


def test_namespace_is_privileged_for_the_node_daemonsets() -> None:
    labels = namespace(defaults().network)["metadata"]["labels"]
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
    assert inputs["values"] == network_operator_values(platform_args.network_operator(cfg))


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


# --------------------------------------------------------------------------------------------
# Who labels Mellanox nodes (issue 11, item 1)

NFD_CRD = NETWORK_OPERATOR / "charts/node-feature-discovery/crds/nfd-api-crds.yaml"
AZURE_NFD_RULE = Path("aks-rdma-infiniband/tests/setup-infra/network-operator-nfd.yaml")


def test_aks_stack_deploys_the_azure_reference_rule(upstream: Path, cfg_of: Callable[[str], Any]) -> None:
    import yaml

    rule = _rule(cfg_of("aks"))
    assert rule is not None, "Pulumi.aks.yaml turns the chart's rules off, so gpuaas's must run"
    validate_against_crd(rule, upstream / NFD_CRD)
    (ours,) = rule["spec"]["rules"]
    (theirs,) = yaml.safe_load((upstream / AZURE_NFD_RULE).read_text())["spec"]["rules"]
    assert ours["labels"] == theirs["labels"] == {MELLANOX_LABEL: "true"}
    (match,) = ours["matchFeatures"]
    (ref,) = theirs["matchFeatures"]
    assert match["feature"] == ref["feature"] == "pci.device"
    assert match["matchExpressions"]["device"] == ref["matchExpressions"]["device"]
    assert match["matchExpressions"]["vendor"] == {"op": "In", "value": ["15b3"]}, "Mellanox only, unlike the guide"


def test_onprem_rule_matches_infiniband_class(upstream: Path) -> None:
    rule = _rule(custom())
    assert rule is not None
    validate_against_crd(rule, upstream / NFD_CRD)
    assert rule["spec"]["rules"][0]["matchFeatures"][0]["matchExpressions"] == {
        "vendor": {"op": "In", "value": ["15b3"]},
        "class": {"op": "In", "value": ["0207"]},
    }


def test_no_gpuaas_rule_while_the_charts_runs() -> None:
    assert network_operator_values(platform_args.network_operator(defaults()))["nfd"]["deployNodeFeatureRules"] is True
    assert _rule(defaults()) is None
    off = aks(deployNodeFeatureRules=False, nodeFeatureRule=False, ofedDriver="host", nodeSelector={"x": "y"})
    assert _rule(off) is None


def test_the_rule_is_applied_before_the_nic_cluster_policy(run_of: Callable[[str], Run]) -> None:
    run = run_of("aks")
    rule = run.named("gpuaas-nic-cluster-policy-node-feature-rule")
    assert rule.type == "kubernetes:nfd.k8s-sigs.io/v1alpha1:NodeFeatureRule"
    assert rule.urn in run.named("gpuaas-nic-cluster-policy-policy").dependencies
    assert run.named("gpuaas-network-operator-release").urn in rule.dependencies
    assert not any(r.name.endswith("-node-feature-rule") for r in run_of("onprem").records)


@pytest.mark.parametrize(
    ("network", "refused"),
    [
        ({"deployNodeFeatureRules": False, "nodeFeatureRule": False, "ofedDriver": "container"}, True),
        ({"deployNodeFeatureRules": False, "nodeFeatureRule": False, "ofedDriver": "host"}, True),  # nodeSelector
        (
            {
                "deployNodeFeatureRules": False,
                "nodeFeatureRule": False,
                "ofedDriver": "host",
                "nodeSelector": {"kubernetes.azure.com/accelerator": "nvidia"},
            },
            False,  # nothing selects on the label: the operator's own labels are not needed
        ),
        ({"deployNodeFeatureRules": False, "nodeFeatureRule": True, "ofedDriver": "container"}, False),
        ({"deployNodeFeatureRules": True, "nodeFeatureRule": False, "ofedDriver": "container"}, False),
    ],
)
def test_a_stack_where_nobody_labels_mellanox_nodes_is_refused(network: dict[str, Any], refused: bool) -> None:
    from components.loader import parse_config
    from components.model.errors import ConfigError

    raw = aks_raw(network=network)
    if not refused:
        parse_config(raw)
        return
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    (issue,) = [str(i) for i in err.value.issues if "nodeFeatureRule" in i.path]
    assert issue.startswith("gpuaas:network.nodeFeatureRule: false") and MELLANOX_LABEL in issue
