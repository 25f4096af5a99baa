"""The RDMA shared device plugin: one HCA shared by many pods as ``<prefix>/<name>``.

It comes from exactly one place per cluster (``cfg.network.rdma_shared_device_plugin``):

- ``nic-cluster-policy``: the Network Operator runs it from the policy's
  ``rdmaSharedDevicePlugin`` section (:mod:`components.operators.nic_cluster_policy`);
- ``standalone``: this module's ConfigMap + DaemonSet, as upstream ships it
  (Mellanox/k8s-rdma-shared-dev-plugin v1.5.3 ``deployment/k8s/base``);
- ``none``: neither.

Two sources would register the same resource name twice with the kubelet, so both renderers
read the same switch and the same :func:`plugin_config`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components import k8s as kube
from components.k8s import Manifest
from components.model.network import Network
from components.model.resources import PART_OF, rdma_shared_resource
from components.model.versions import Versions

#: The plugin reads ``/k8s-rdma-shared-dev-plugin/config.json`` (upstream daemonset.yaml).
CONFIG_MAP = "rdma-devices"
CONFIG_DIR = "/k8s-rdma-shared-dev-plugin"
DAEMONSET = "rdma-shared-dp-ds"
#: Mellanox (NVIDIA networking) PCI vendor id.
MELLANOX_VENDOR = "15b3"
#: PCI device ids of the InfiniBand-capable ConnectX/BlueField physical functions in the
#: sriov-network-operator's supported-NIC list (network-operator v26.4.1 chart): ConnectX-4 1013,
#: ConnectX-5 1017, ConnectX-5 Ex 1019, ConnectX-6 101b, ConnectX-7 1021, ConnectX-8 1023,
#: ConnectX-9 1025, BlueField-3 a2dc. Their VFs (1014, 1016, 1018, 101a, 101c, 101e) are left
#: out: on-prem with SR-IOV partitions the plugin takes PFs only (../shared/reference/domain.md §3).
CONNECTX_PF_DEVICE_IDS = ("1013", "1017", "1019", "101b", "1021", "1023", "1025", "a2dc")
#: The VF device ids of the same families, for the tests' disjointness check.
CONNECTX_VF_DEVICE_IDS = ("1014", "1016", "1018", "101a", "101c", "101e")


@dataclass(frozen=True, kw_only=True)
class RdmaSharedDevicePluginArgs:
    """Arguments of :class:`RdmaSharedDevicePlugin` (and of the policy's ``rdmaSharedDevicePlugin`` section).

    Ordering: ``opts.depends_on`` (the NicClusterPolicy, whose NIC driver the plugin needs), forwarded
    to every child.
    """

    network: Network = field(default_factory=lambda: Network(rdma_shared_device_plugin="standalone"))
    """The resource name, ``rdmaHcaMax``, the operator namespace and the RDMA nodes' selector and
    tolerations (``gpuaas:network``); its ``rdmaSharedDevicePlugin`` must be ``standalone`` for this component."""
    versions: Versions = field(default_factory=Versions)
    """The plugin image's pinned repository and tag (``rdmaSharedDevicePluginImage``, ``rdmaSharedDevicePlugin``)."""
    physical_functions_only: bool = False
    """Pool ConnectX physical functions only: on-prem with SR-IOV team partitions, whose VFs are
    ``mlx5_core`` InfiniBand devices too and must stay out of the shared pool (defaults to off, as on AKS)."""


def nic_cluster_policy_section(network: Network) -> bool:
    """Whether the NicClusterPolicy carries the plugin."""
    return network.rdma_shared_device_plugin == "nic-cluster-policy"


def standalone(network: Network) -> bool:
    """Whether gpuaas deploys the plugin itself."""
    return network.rdma_shared_device_plugin == "standalone"


def resource(network: Network) -> str:
    """The extended resource pods request, e.g. ``rdma/hca_shared_devices_a``."""
    return rdma_shared_resource(network.rdma_resource_prefix, network.rdma_resource_name)


def plugin_config(network: Network, *, physical_functions_only: bool) -> dict[str, Any]:
    """The plugin's ``config.json`` (identical in both forms).

    ``rdmaHcaMax`` bounds how many pods share one HCA (1000 on AKS: upstream's example value).
    ``linkTypes: [infiniband]`` as in Microsoft's AKS guide (configs/nicclusterpolicy/
    rdma-shared-device-plugin/rdma.yaml): on Azure the accelerated-networking Ethernet VF is a
    Mellanox ``mlx5_core`` device too, and vendor/driver alone would pool it with the IB HCAs.

    On-prem with SR-IOV partitions, ``deviceIDs`` limits the pool to physical functions: the
    team VFs are ``mlx5_core`` InfiniBand devices as well, and a VF in the shared pool would hand
    its partition's GUID to any pod that asks for the shared resource — past the team's quota
    and its NAD. (On AKS the HCAs the VM sees are themselves VFs, so no such filter there.)
    """
    selectors: dict[str, list[str]] = {
        "vendors": [MELLANOX_VENDOR],
        "drivers": ["mlx5_core"],
        "linkTypes": ["infiniband"],
    }
    if physical_functions_only:
        selectors["deviceIDs"] = list(CONNECTX_PF_DEVICE_IDS)
    return {
        "configList": [
            {
                "resourcePrefix": network.rdma_resource_prefix,
                "resourceName": network.rdma_resource_name,
                "rdmaHcaMax": network.rdma_hca_max,
                "selectors": selectors,
            }
        ]
    }


def plugin_config_json(network: Network, *, physical_functions_only: bool) -> str:
    """:func:`plugin_config` as the JSON text both the policy and the ConfigMap carry."""
    return json.dumps(plugin_config(network, physical_functions_only=physical_functions_only), indent=2) + "\n"


def config_map(args: RdmaSharedDevicePluginArgs) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": args.network.namespace, "labels": dict(PART_OF)},
        "data": {"config.json": plugin_config_json(args.network, physical_functions_only=args.physical_functions_only)},
    }


def daemonset(args: RdmaSharedDevicePluginArgs) -> Manifest:
    """The plugin DaemonSet, shaped like upstream's (privileged, kubelet plugin dirs, /dev).

    The config hash annotation re-rolls the pods when ``config.json`` changes: the plugin reads
    it only at start.
    """
    network, versions = args.network, args.versions
    config = plugin_config_json(network, physical_functions_only=args.physical_functions_only)
    digest = hashlib.sha256(config.encode()).hexdigest()
    image = f"{versions.rdma_shared_device_plugin_image}:{versions.rdma_shared_device_plugin}"
    return kube.node_daemonset(
        network,
        DAEMONSET,
        {
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "k8s-rdma-shared-dp-ds",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "securityContext": {"privileged": True},
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "64Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "volumeMounts": [
                        {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                        {"name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry"},
                        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
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
                        "name": CONFIG_MAP,
                        "items": [{"key": "config.json", "path": "config.json"}],
                    },
                },
                {"name": "devs", "hostPath": {"path": "/dev/"}},
            ],
        },
        node_selector=network.node_selector,
        annotations={"gpuaas.io/config-sha256": digest},
    )


class RdmaSharedDevicePlugin(pulumi.ComponentResource):
    """The standalone plugin. Create it only when :func:`standalone` is true (the Platform does)."""

    config_map: pulumi.CustomResource
    daemonset: pulumi.CustomResource

    def __init__(self, name: str, args: RdmaSharedDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:RdmaSharedDevicePlugin", name, None, opts)
        after = kube.depends_on(opts)
        if not standalone(args.network):
            raise ValueError(
                "RdmaSharedDevicePlugin is the standalone form; gpuaas:network.rdmaSharedDevicePlugin is "
                f"{args.network.rdma_shared_device_plugin!r} (set it to standalone, or do not create this component)"
            )
        self.config_map = kube.apply(f"{name}-config", config_map(args), kube.child(self, after))
        self.daemonset = kube.apply(f"{name}-daemonset", daemonset(args), kube.child(self, [*after, self.config_map]))
        self.register_outputs({"resource": resource(args.network)})
