"""Stack configs the network-side tests share: the smallest stacks and one with every knob turned.

``defaults`` cases leave ``gpuaas:network`` and ``gpuaas:versions`` unset; ``custom`` sets every
field the network components read away from its default.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from components.loader import parse_config
from components.model.config import StackConfig

NETWORK_OPERATOR = Path("network-operator/v26.4.1")
NCP_CRD = NETWORK_OPERATOR / "crds/mellanox.com_nicclusterpolicies.yaml"
WEBHOOK_SCHEMAS = NETWORK_OPERATOR / "webhook-schemas"
#: Kubernetes version the core objects are validated against (the AKS pin, components/model/versions.py).
K8S_VERSION = "1.36.0"


def onprem_raw(**extra: Any) -> dict[str, Any]:
    """The smallest on-prem stack, with two partitioned teams listed out of name order and one without."""
    raw: dict[str, Any] = {
        "platform": {
            "kind": "onprem",
            "kubernetesVersion": "1.37.2",
            "nodeGroups": [{"name": "gpus", "gpuModel": "H100-80GB"}],
            "nodes": [{"name": "node-1", "id": 1, "nodeGroup": "gpus"}],
            "multus": {"clusterNetwork": "k8s-pod-network"},
        },
        "teams": [
            {"name": "zeta", "partition": {"pkey": "0x0002", "vfIndex": 1}},
            {"name": "alpha", "partition": {"pkey": "0x0001", "vfIndex": 0}},
            {"name": "plain"},
        ],
    }
    raw.update(copy.deepcopy(extra))
    return raw


def aks_raw(**extra: Any) -> dict[str, Any]:
    """The smallest AKS stack."""
    raw: dict[str, Any] = {
        "platform": {
            "kind": "aks",
            "subscriptionId": "00000000-0000-0000-0000-000000000000",
            "location": "eastus",
            "resourceGroup": {"name": "rg"},
            "clusterName": "c",
            "gpuPools": [{"name": "ndh100"}],
        },
    }
    raw.update(copy.deepcopy(extra))
    return raw


CUSTOM_NETWORK: dict[str, Any] = {
    "namespace": "nvnet",
    "deployNodeFeatureRules": False,
    "ofedDriver": "container",
    "rdmaSharedDevicePlugin": "nic-cluster-policy",
    "rdmaResourcePrefix": "rdma",
    "rdmaResourceName": "shared_ib",
    "rdmaHcaMax": 63,
    "nodeSelector": {"gpuaas.io/rdma": "true", "kubernetes.io/arch": "amd64"},
    "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ib"},
    ],
    "helmTimeoutSeconds": 2400,
}

CUSTOM_VERSIONS: dict[str, Any] = {
    "helmRepository": "https://mirror.example.com/nvidia",
    "networkOperatorChart": "v26.4.0",
    "mellanoxRepository": "mirror.example.com/mellanox",
    "networkOperatorComponents": "network-operator-v26.4.0",
    "docaDriver": "doca3.2.0-25.10-1.2.8.0-2",
    "ibSriovCniImage": "mirror.example.com/ib-sriov-cni",
    "ibSriovCni": "v1.2.1",
    "rdmaSharedDevicePluginImage": "mirror.example.com/k8s-rdma-shared-dev-plugin",
    "rdmaSharedDevicePlugin": "v1.5.2",
    "nodeToolsImage": "mirror.example.com/debian",
    "nodeTools": "12.11-slim",
}


def onprem_custom_raw() -> dict[str, Any]:
    raw = onprem_raw(network=CUSTOM_NETWORK, versions=CUSTOM_VERSIONS)
    raw["platform"]["fabric"] = {"ipam": "nv-ipam"}
    raw["platform"]["multus"] = {
        "clusterNetwork": "cilium",
        "cniConfDir": "/var/lib/cni/conf",
        "readinessIndicatorFile": "/var/lib/cni/conf/05-cilium.conflist",
    }
    return raw


def defaults() -> StackConfig:
    return parse_config(onprem_raw())


def custom() -> StackConfig:
    return parse_config(onprem_custom_raw())


def aks(**network: Any) -> StackConfig:
    return parse_config(aks_raw(network=network) if network else aks_raw())
