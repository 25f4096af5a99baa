"""NicClusterPolicy: snapshots, the CRD schema, the webhook decision on ``pKeys``, the ib-sriov CNI installer."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft4Validator

from components import platform_args
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import sriov_resource
from components.operators.nic_cluster_policy import (
    ib_sriov_cni_daemonset,
    nic_cluster_policy,
    sriov_device_plugin_config,
)
from components.plan.offline import Run
from tests.network_cases import (
    K8S_VERSION,
    NCP_CRD,
    WEBHOOK_SCHEMAS,
    aks,
    custom,
    defaults,
    onprem_raw,
)
from tests.schema_helpers import crd_errors, validate_against_crd

#: On-prem stacks with SR-IOV partitions: the shared plugin pools ConnectX PFs only, never team VFs.
ONPREM_PF_SELECTORS = {
    "vendors": ["15b3"],
    "drivers": ["mlx5_core"],
    "linkTypes": ["infiniband"],
    "deviceIDs": ["1013", "1017", "1019", "101b", "1021", "1023", "1025", "a2dc"],
}

# --------------------------------------------------------------------------------------------
# Snapshots. ``config`` strings are compared decoded, and must be the canonical JSON of that
# value, so a change of content or of formatting fails.


def decoded(manifest: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(manifest)
    for section in ("rdmaSharedDevicePlugin", "sriovDevicePlugin"):
        part = out["spec"].get(section)
        if part is not None:
            value = json.loads(part["config"])
            assert part["config"] == json.dumps(value, indent=2) + "\n", f"{section}.config is not canonical JSON"
            part["config"] = value
    multus = out["spec"].get("secondaryNetwork", {}).get("multus", {})
    if "config" in multus:
        value = json.loads(multus["config"])
        assert multus["config"] == json.dumps(value, indent=2) + "\n", "multus.config is not canonical JSON"
        multus["config"] = value
    return out


def _multus_config(namespace: str, network: str, conf_dir: str, **extra: str) -> dict[str, Any]:
    """What Multus must be told: isolate namespaces, no global ``default``, the primary network."""
    return {
        "cniVersion": "0.3.1",
        "name": "multus-cni-network",
        "type": "multus",
        "kubeconfig": f"{conf_dir}/multus.d/multus.kubeconfig",
        "capabilities": {"portMappings": True, "bandwidth": True},
        "confDir": conf_dir,
        "clusterNetwork": network,
        "namespaceIsolation": True,
        "globalNamespaces": namespace,
        "logToStderr": True,
        "logLevel": "error",
        **extra,
    }


MELLANOX = "nvcr.io/nvidia/mellanox"
COMPONENTS = "network-operator-v26.4.1"


def _sriov_pool(name: str, pkey: str) -> dict[str, Any]:
    return {
        "resourcePrefix": "nvidia.com",
        "resourceName": name,
        "selectors": {
            "vendors": ["15b3"],
            "drivers": ["mlx5_core"],
            "linkTypes": ["infiniband"],
            "pKeys": [pkey],
            "isRdma": True,
        },
    }


DEFAULTS_POLICY = {
    "apiVersion": "mellanox.com/v1alpha1",
    "kind": "NicClusterPolicy",
    "metadata": {
        "name": "nic-cluster-policy",
        "labels": {"app.kubernetes.io/part-of": "gpuaas"},
        "annotations": {"pulumi.com/waitFor": "jsonpath={.status.state}=ready"},
    },
    "spec": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "feature.node.kubernetes.io/pci-15b3.present", "operator": "In", "values": ["true"]}
                        ]
                    }
                ]
            }
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "rdmaSharedDevicePlugin": {
            "image": "k8s-rdma-shared-dev-plugin",
            "repository": MELLANOX,
            "version": COMPONENTS,
            "config": {
                "configList": [
                    {
                        "resourcePrefix": "rdma",
                        "resourceName": "hcashared",
                        "rdmaHcaMax": 1000,
                        "selectors": ONPREM_PF_SELECTORS,
                    }
                ]
            },
        },
        "sriovDevicePlugin": {
            "image": "sriov-network-device-plugin",
            "repository": MELLANOX,
            "version": COMPONENTS,
            # Sorted by team name: alpha (0x0001) before zeta (0x0002), whatever the config order.
            "config": {"resourceList": [_sriov_pool("sriov8001", "0x8001"), _sriov_pool("sriov8002", "0x8002")]},
        },
        "secondaryNetwork": {
            "multus": {
                "image": "multus-cni",
                "repository": MELLANOX,
                "version": COMPONENTS,
                "config": _multus_config("nvidia-network-operator", "k8s-pod-network", "/etc/cni/net.d"),
            },
            "cniPlugins": {"image": "plugins", "repository": MELLANOX, "version": COMPONENTS},
        },
    },
}

MIRROR = "mirror.example.com/mellanox"
MIRROR_COMPONENTS = "network-operator-v26.4.0"

CUSTOM_SPEC = {
    "nodeAffinity": {
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
    },
    "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ib"},
    ],
    "ofedDriver": {
        "image": "doca-driver",
        "repository": MIRROR,
        "version": "doca3.2.0-25.10-1.2.8.0-2",
        "forcePrecompiled": False,
        "env": [{"name": "OFED_BLACKLIST_MODULES_FILE", "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"}],
        "upgradePolicy": {
            "autoUpgrade": True,
            "maxParallelUpgrades": 1,
            "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300},
        },
        "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
        "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
        "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30},
    },
    "rdmaSharedDevicePlugin": {
        "image": "k8s-rdma-shared-dev-plugin",
        "repository": MIRROR,
        "version": MIRROR_COMPONENTS,
        "config": {
            "configList": [
                {
                    "resourcePrefix": "rdma",
                    "resourceName": "shared_ib",
                    "rdmaHcaMax": 63,
                    "selectors": ONPREM_PF_SELECTORS,
                }
            ]
        },
    },
    "sriovDevicePlugin": {
        "image": "sriov-network-device-plugin",
        "repository": MIRROR,
        "version": MIRROR_COMPONENTS,
        "config": {"resourceList": [_sriov_pool("sriov8001", "0x8001"), _sriov_pool("sriov8002", "0x8002")]},
    },
    "secondaryNetwork": {
        "multus": {
            "image": "multus-cni",
            "repository": MIRROR,
            "version": MIRROR_COMPONENTS,
            "config": _multus_config(
                "nvnet",
                "cilium",
                "/var/lib/cni/conf",
                readinessindicatorfile="/var/lib/cni/conf/05-cilium.conflist",
            ),
        },
        "cniPlugins": {"image": "plugins", "repository": MIRROR, "version": MIRROR_COMPONENTS},
    },
    "nvIpam": {"image": "nvidia-k8s-ipam", "repository": MIRROR, "version": MIRROR_COMPONENTS, "enableWebhook": False},
}

#: Microsoft's AKS guide in gpuaas form: containerized DOCA driver, standalone RDMA plugin.
AKS_SPEC = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.azure.com/accelerator", "operator": "In", "values": ["nvidia"]}
                    ]
                }
            ]
        }
    },
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
    "ofedDriver": {**CUSTOM_SPEC["ofedDriver"], "repository": MELLANOX, "version": "doca3.4.1-26.04-1.1.0.0-1"},  # type: ignore[dict-item]
}


def aks_guide() -> StackConfig:
    return aks(
        ofedDriver="container",
        rdmaSharedDevicePlugin="standalone",
        deployNodeFeatureRules=False,
        nodeSelector={"kubernetes.azure.com/accelerator": "nvidia"},
    )


def test_defaults_snapshot() -> None:
    assert decoded(nic_cluster_policy(platform_args.nic_cluster_policy(defaults()))) == DEFAULTS_POLICY


def test_custom_snapshot() -> None:
    policy = decoded(nic_cluster_policy(platform_args.nic_cluster_policy(custom())))
    assert policy["metadata"] == DEFAULTS_POLICY["metadata"]
    assert policy["spec"] == CUSTOM_SPEC


def test_aks_snapshot() -> None:
    assert decoded(nic_cluster_policy(platform_args.nic_cluster_policy(aks_guide())))["spec"] == AKS_SPEC


# --------------------------------------------------------------------------------------------
# The CRD (unknown fields refused)

CASES: dict[str, Callable[[], StackConfig]] = {
    "defaults": defaults,
    "custom": custom,
    "aks-guide": aks_guide,
    "aks-defaults": aks,
    "onprem-no-partitions": lambda: parse_config({**onprem_raw(), "teams": []}),
    "onprem-none": lambda: parse_config(onprem_raw(network={"rdmaSharedDevicePlugin": "none"})),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_policy_is_valid_for_the_pinned_crd(upstream: Path, case: Callable[[], StackConfig]) -> None:
    validate_against_crd(nic_cluster_policy(platform_args.nic_cluster_policy(case())), upstream / NCP_CRD)


def test_checked_in_stacks_render_valid_policies(
    upstream: Path, stack: str, cfg_of: Callable[[str], StackConfig]
) -> None:
    validate_against_crd(nic_cluster_policy(platform_args.nic_cluster_policy(cfg_of(stack))), upstream / NCP_CRD)


def test_crd_check_refuses_removed_ipam_plugin_and_typos(upstream: Path) -> None:
    policy = nic_cluster_policy(platform_args.nic_cluster_policy(defaults()))
    policy["spec"]["secondaryNetwork"]["ipamPlugin"] = {"image": "whereabouts", "repository": MELLANOX}
    policy["spec"]["ofedDriver"] = {"image": "doca-driver", "upgradePolicy": {"autoUpgrades": True}}
    errors = crd_errors(policy, upstream / NCP_CRD)
    assert any("ipamPlugin" in e for e in errors)
    assert any("autoUpgrades" in e for e in errors)


def test_no_ipam_plugin_anywhere() -> None:
    for case in CASES.values():
        assert "ipamPlugin" not in json.dumps(nic_cluster_policy(platform_args.nic_cluster_policy(case())))


# --------------------------------------------------------------------------------------------
# Sections switched by the config


def test_ofed_driver_only_for_the_container_driver() -> None:
    assert "ofedDriver" not in nic_cluster_policy(platform_args.nic_cluster_policy(defaults()))["spec"]
    assert "ofedDriver" in nic_cluster_policy(platform_args.nic_cluster_policy(custom()))["spec"]
    assert "ofedDriver" not in nic_cluster_policy(platform_args.nic_cluster_policy(aks(ofedDriver="host")))["spec"]


def test_onprem_sections_never_on_aks() -> None:
    spec = nic_cluster_policy(platform_args.nic_cluster_policy(aks_guide()))["spec"]
    assert not {"sriovDevicePlugin", "secondaryNetwork", "nvIpam"} & spec.keys()


def test_nv_ipam_only_with_the_nv_ipam_fabric() -> None:
    assert "nvIpam" not in nic_cluster_policy(platform_args.nic_cluster_policy(defaults()))["spec"]
    assert "nvIpam" in nic_cluster_policy(platform_args.nic_cluster_policy(custom()))["spec"]


def test_no_sriov_device_plugin_without_partitions() -> None:
    spec = nic_cluster_policy(
        platform_args.nic_cluster_policy(parse_config({**onprem_raw(), "teams": [{"name": "plain"}]}))
    )["spec"]
    assert "sriovDevicePlugin" not in spec
    assert "secondaryNetwork" in spec


def test_sriov_pools_follow_team_names_not_config_order() -> None:
    raw = onprem_raw()
    forward = sriov_device_plugin_config(platform_args.nic_cluster_policy(parse_config(raw)).sriov_pkeys)
    raw["teams"].reverse()
    assert sriov_device_plugin_config(platform_args.nic_cluster_policy(parse_config(raw)).sriov_pkeys) == forward
    names = [r["resourceName"] for r in forward["resourceList"]]
    assert names == ["sriov8001", "sriov8002"]


def test_sriov_pools_are_the_resources_teams_request(cfg_of: Callable[[str], StackConfig]) -> None:
    """Each team's pool is the one spelling in components.model.resources (quota, NAD, Jobs use it too)."""
    cfg = cfg_of("onprem")
    pools = {
        f"{r['resourcePrefix']}/{r['resourceName']}"
        for r in sriov_device_plugin_config(platform_args.nic_cluster_policy(cfg).sriov_pkeys)["resourceList"]
    }
    wanted = {sriov_resource(t.partition.pkey) for t in cfg.teams if t.partition is not None}  # type: ignore[union-attr]
    assert pools == wanted and len(pools) == len(cfg.teams)


def test_pkeys_are_in_the_kernel_full_member_form() -> None:
    """sriovdp compares pKeys to sysfs ``ports/1/pkeys/0`` by string equality: ``0x8001``, not ``0x1``."""
    for pool in sriov_device_plugin_config(platform_args.nic_cluster_policy(defaults()).sriov_pkeys)["resourceList"]:
        (pkey,) = pool["selectors"]["pKeys"]
        assert len(pkey) == 6 and pkey.startswith("0x8") and pkey == pkey.lower()


# --------------------------------------------------------------------------------------------
# The admission-webhook decision: pKeys is kept, the webhook stays off


def _schema(upstream: Path, name: str) -> dict[str, Any]:
    return dict(json.loads((upstream / WEBHOOK_SCHEMAS / name).read_text()))


def with_pkeys(net_device: dict[str, Any]) -> dict[str, Any]:
    """``net_device.json`` with exactly one change: ``pKeys`` allowed as a selector (list of strings)."""
    schema = copy.deepcopy(net_device)
    for branch in schema["properties"]["selectors"]["oneOf"]:
        props = branch["items"]["properties"] if branch["type"] == "array" else branch["properties"]
        assert "pKeys" not in props, "upstream now lists pKeys: drop with_pkeys and reconsider the webhook"
        props["pKeys"] = {"type": "array", "items": {"type": "string", "minLength": 1}}
    return schema


def _errors(schema: dict[str, Any], instance: Any) -> list[str]:
    return [e.message for e in Draft4Validator(schema).iter_errors(instance)]


@pytest.mark.parametrize("case", [defaults, custom], ids=["defaults", "custom"])
def test_sriov_config_passes_the_webhook_schemas_with_pkeys_added(upstream: Path, case: Callable[[], Any]) -> None:
    config = json.loads(
        nic_cluster_policy(platform_args.nic_cluster_policy(case()))["spec"]["sriovDevicePlugin"]["config"]
    )
    assert _errors(_schema(upstream, "sriov_network_device_plugin.json"), config) == []
    net_device = with_pkeys(_schema(upstream, "net_device.json"))
    for pool in config["resourceList"]:
        assert pool.get("deviceType", "netDevice") == "netDevice"
        assert _errors(net_device, pool) == []


def test_unmodified_webhook_schema_refuses_pkeys(upstream: Path) -> None:
    """Why the webhook is off: upstream net_device.json has additionalProperties false and no pKeys."""
    config = json.loads(
        nic_cluster_policy(platform_args.nic_cluster_policy(defaults()))["spec"]["sriovDevicePlugin"]["config"]
    )
    net_device = _schema(upstream, "net_device.json")
    for pool in config["resourceList"]:
        assert _errors(net_device, pool), "net_device.json accepts pKeys now: the admission webhook could be enabled"
        without = {**pool, "selectors": {k: v for k, v in pool["selectors"].items() if k != "pKeys"}}
        assert _errors(net_device, without) == [], "only pKeys may be what the webhook refuses"


@pytest.mark.parametrize("case", [defaults, custom], ids=["defaults", "custom"])
def test_rdma_config_passes_the_unmodified_webhook_schema(upstream: Path, case: Callable[[], Any]) -> None:
    config = json.loads(
        nic_cluster_policy(platform_args.nic_cluster_policy(case()))["spec"]["rdmaSharedDevicePlugin"]["config"]
    )
    assert _errors(_schema(upstream, "rdma_shared_device_plugin.json"), config) == []


# --------------------------------------------------------------------------------------------
# ib-sriov CNI installer


def test_ib_sriov_cni_daemonset() -> None:
    ds = ib_sriov_cni_daemonset(custom().network, custom().versions)
    kubernetes_validate.validate(ds, K8S_VERSION, strict=True)
    assert ds["metadata"] == {
        "name": "ib-sriov-cni",
        "namespace": "nvnet",
        "labels": {"app.kubernetes.io/name": "ib-sriov-cni", "app.kubernetes.io/part-of": "gpuaas"},
    }
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "mirror.example.com/ib-sriov-cni:v1.2.1"
    # The image's entrypoint copies the binary into /host/opt/cni/bin (upstream deployment manifest).
    assert container["volumeMounts"] == [{"name": "cnibin", "mountPath": "/host/opt/cni/bin"}]
    assert pod["volumes"] == [{"name": "cnibin", "hostPath": {"path": "/opt/cni/bin", "type": "DirectoryOrCreate"}}]
    assert pod["nodeSelector"] == {"gpuaas.io/rdma": "true", "kubernetes.io/arch": "amd64"}
    assert pod["tolerations"][1] == {"key": "dedicated", "operator": "Equal", "value": "ib"}
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()


def test_ib_sriov_cni_default_image() -> None:
    (container,) = ib_sriov_cni_daemonset(defaults().network, defaults().versions)["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["image"] == "ghcr.io/k8snetworkplumbingwg/ib-sriov-cni:v1.3.0"


# --------------------------------------------------------------------------------------------
# Under mocks


def test_policy_component_under_mocks(run_of: Callable[[str], Run], cfg_of: Callable[[str], StackConfig]) -> None:
    run = run_of("onprem")
    component = run.named("gpuaas-nic-cluster-policy")
    assert component.type == "gpuaas:index:NicClusterPolicy"
    assert component.parent == run.named("gpuaas").urn
    policy = run.named("gpuaas-nic-cluster-policy-policy")
    assert policy.type == "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
    assert policy.parent == component.urn
    assert policy.inputs["metadata"]["name"] == "nic-cluster-policy"
    assert policy.inputs["spec"] == nic_cluster_policy(platform_args.nic_cluster_policy(cfg_of("onprem")))["spec"]
    # The CRD comes with the operator's release: the policy waits for it.
    assert run.named("gpuaas-network-operator-release").urn in policy.dependencies
    cni = run.named("gpuaas-nic-cluster-policy-ib-sriov-cni")
    assert cni.parent == component.urn and cni.inputs["metadata"]["name"] == "ib-sriov-cni"
    assert run.named("gpuaas-network-operator-release").urn in cni.dependencies


def test_gpu_operator_waits_for_the_policy(run_of: Callable[[str], Run]) -> None:
    run = run_of("onprem")
    policy = run.named("gpuaas-nic-cluster-policy-policy")
    releases = [r for r in run.of_type("kubernetes:helm.sh/v3:Release") if "gpu-operator" in r.name]
    assert releases, "the plan has no GPU Operator release"
    for release in releases:
        assert policy.urn in release.dependencies


# --------------------------------------------------------------------------------------------
# Property: a team's VF pool does not depend on which other teams exist or their order

_TEAMS = [{"name": f"team-{c}", "partition": {"pkey": f"0x{i + 1:04x}", "vfIndex": i}} for i, c in enumerate("abcdef")]


@settings(max_examples=40, deadline=None)
@given(st.permutations(_TEAMS).flatmap(lambda teams: st.integers(1, len(teams)).map(lambda n: teams[:n])))
def test_a_teams_pool_is_independent_of_the_other_teams(teams: list[dict[str, Any]]) -> None:
    def pools(selected: list[dict[str, Any]]) -> dict[str, Any]:
        args = platform_args.nic_cluster_policy(parse_config({**onprem_raw(), "teams": selected}))
        config = sriov_device_plugin_config(args.sriov_pkeys)
        return {p["resourceName"]: p for p in config["resourceList"]}

    together = pools(teams)
    for team in teams:
        (alone,) = pools([team]).items()
        assert together[alone[0]] == alone[1]
    names = list(together)
    assert names == sorted(names)  # team-a..f have ascending P_Keys, so name order is P_Key order
