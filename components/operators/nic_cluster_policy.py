"""The NicClusterPolicy (``mellanox.com/v1alpha1``) and the ib-sriov CNI installer.

One cluster-scoped policy tells the Network Operator what to run on the RDMA nodes (field names
as in network-operator v26.4.1 ``api/v1alpha1``; see ../shared/reference/upstream-summary.md §2):

- ``ofedDriver`` only when the DOCA driver runs as a container (``cfg.network.ofed_driver``);
  with ``host`` the nodes carry DOCA-OFED already.
- ``rdmaSharedDevicePlugin`` only when the policy is its source
  (:mod:`components.operators.rdma_shared_device_plugin` says which).
- On-prem: ``sriovDevicePlugin`` with one VF pool per team partition, ``secondaryNetwork``
  (Multus with gpuaas' namespace-isolating config from :mod:`components.fabric.multus`, and the
  reference CNI plugins) and ``nvIpam`` when the fabric uses NVIDIA IPAM. No
  ``ipamPlugin``: upstream removed it in v25.10 (commit 63c7ea65), the API server would prune or
  refuse it.

**pKeys and the admission webhook.** Each team's pool selects VFs by ``pKeys`` — the P_Key at
index 0 of the VF, in the kernel's full-member form (``0x8001``) — so a pool only ever holds VFs
of that team's partition (SR-IOV device plugin v3.11.0 README, "pKeys"; the match is exact string
equality on ``/sys/.../pkeys/0``). The Network Operator's admission webhook validates the plugin
config against ``webhook-schemas/net_device.json``, which has ``additionalProperties: false`` and
no ``pKeys`` (v26.4.1 and master), so it would refuse this policy. gpuaas keeps ``pKeys`` and keeps
the webhook off (:func:`components.operators.network_operator.network_operator_values`); the tests validate
every device-plugin config against the webhook schemas with exactly ``pKeys`` added, and show that
the unmodified schema refuses it. Revisit when upstream lists ``pKeys``.

**ib-sriov CNI.** The policy has no field for the ib-sriov CNI binary the team NADs use
(``"type": "ib-sriov"``), so on-prem gpuaas installs it with a DaemonSet shaped like upstream's
``deployment/ib-sriov-cni-daemonset.yaml`` (k8snetworkplumbingwg/ib-sriov-cni): the image's
entrypoint copies ``ib-sriov`` into the host's ``/opt/cni/bin`` and sleeps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components import k8s as kube
from components.fabric import multus, multus_kubeconfig
from components.guards.gate import gated
from components.k8s import Manifest, tolerations
from components.model.fabric import Multus
from components.model.network import Network
from components.model.resources import PART_OF, SRIOV_PREFIX, sriov_resource_name
from components.model.types import PKey, full_member_pkey
from components.model.versions import Versions
from components.operators import rdma_shared_device_plugin as rdma
from components.operators.network_operator import node_affinity, node_feature_rule

NAME = "nic-cluster-policy"
API_VERSION = "mellanox.com/v1alpha1"
#: Pulumi waits until the operator reports every state ready (pulumi-kubernetes ≥ 4.18
#: ``pulumi.com/waitFor``), so the GPU Operator and ib-node-config start on working NICs.
WAIT_FOR_READY = "jsonpath={.status.state}=ready"
IB_SRIOV_CNI = "ib-sriov-cni"


@dataclass(frozen=True, kw_only=True)
class NicClusterPolicyArgs:
    """Arguments of :class:`NicClusterPolicy`.

    Ordering: ``opts.depends_on`` should hold the Network Operator release (the policy's CRD comes
    with it); it is forwarded to every child.
    """

    network: Network = field(default_factory=Network)
    """The RDMA nodes (selector, tolerations), the DOCA driver's form, the RDMA shared device plugin's
    source and resource, and the NodeFeatureRule switches (``gpuaas:network``)."""
    versions: Versions = field(default_factory=Versions)
    """The operands' pinned images: the Mellanox registry and component tag, the DOCA driver, ib-sriov CNI
    and the node tools (the Multus kubeconfig refresher)."""
    azure_vfs: bool = False
    """gpuaas's NodeFeatureRule labels Azure ND VMs' InfiniBand VFs (device ids 101c/101e), not the
    InfiniBand PCI class: the nodes are AKS ND pools (defaults to off: on-prem)."""
    secondary_network: bool = False
    """Team networks on this fabric: Multus, the reference CNI plugins and the ib-sriov CNI installer
    (on-prem; defaults to off, as on AKS where pods use the shared HCA only)."""
    sriov_pkeys: tuple[PKey, ...] = ()
    """The team partitions' P_Keys, one SR-IOV device plugin VF pool each, in pool order (on-prem;
    none leaves ``sriovDevicePlugin`` out)."""
    multus: Multus | None = None
    """The cluster CNI Multus delegates to, when gpuaas writes Multus' config with namespace isolation
    and refreshes its kubeconfig (``platform.multus``); ``None`` leaves the operator's default."""
    nv_ipam: bool = False
    """Run NVIDIA IPAM (``nvIpam``, webhook off) for the team networks (``platform.fabric.ipam: nv-ipam``)."""
    gate: pulumi.Output[bool] | None = None
    """The day-2 guards (:mod:`components.guards`): the policy's spec waits for them, so a guarded
    fabric change stops before the VF pools move. ``None``: no guard."""


def _image(versions: Versions, image: str) -> dict[str, str]:
    """An operand image from NVIDIA's Mellanox registry at the operator's component tag."""
    return {
        "image": image,
        "repository": versions.mellanox_repository,
        "version": versions.network_operator_components,
    }


def ofed_driver(versions: Versions) -> dict[str, Any]:
    """The DOCA driver container, as in the AKS guide's ``nicclusterpolicy/base/nic.yaml``.

    The operator appends ``-<os><version>-<arch>`` to ``version``. Probes and the drain policy
    are the guide's; auto-upgrade drains one node at a time so a driver bump never takes the
    whole fabric down.
    """
    return {
        "image": "doca-driver",
        "repository": versions.mellanox_repository,
        "version": versions.doca_driver,
        "forcePrecompiled": False,
        "env": [
            # While it swaps inbox modules for DOCA's, the driver container blacklists them so the
            # host cannot load them back; the blacklist must land on the host's modprobe.d or the
            # race stays open (Mellanox/doca-driver-build#52, fixed in #86). Microsoft's guide sets
            # the host path explicitly until every image has the fix (Azure/aks-rdma-infiniband#55).
            {"name": "OFED_BLACKLIST_MODULES_FILE", "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"},
        ],
        "upgradePolicy": {
            "autoUpgrade": True,
            "maxParallelUpgrades": 1,
            "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300},
        },
        "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
        "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
        "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30},
    }


def sriov_device_plugin_config(pkeys: tuple[PKey, ...]) -> dict[str, Any]:
    """SR-IOV device plugin config: one VF pool per team partition.

    ``pKeys`` binds a pool to its partition (see the module docstring); ``linkTypes`` is required
    with it, ``isRdma`` keeps VFs without an RDMA device out.
    """
    return {
        "resourceList": [
            {
                "resourcePrefix": SRIOV_PREFIX,
                "resourceName": sriov_resource_name(pkey),
                "selectors": {
                    "vendors": [rdma.MELLANOX_VENDOR],
                    "drivers": ["mlx5_core"],
                    "linkTypes": ["infiniband"],
                    "pKeys": [full_member_pkey(pkey)],
                    "isRdma": True,
                },
            }
            for pkey in pkeys
        ]
    }


def nic_cluster_policy(args: NicClusterPolicyArgs) -> Manifest:
    """The whole NicClusterPolicy manifest for ``args``."""
    net, versions = args.network, args.versions
    spec: dict[str, Any] = {
        "nodeAffinity": node_affinity(net),
        "tolerations": tolerations(net),
    }
    if net.ofed_driver == "container":
        spec["ofedDriver"] = ofed_driver(versions)
    if rdma.nic_cluster_policy_section(net):
        spec["rdmaSharedDevicePlugin"] = {
            **_image(versions, "k8s-rdma-shared-dev-plugin"),
            "config": rdma.plugin_config_json(net, physical_functions_only=rdma_physical_functions_only(args)),
        }
    if args.secondary_network:
        if args.sriov_pkeys:
            spec["sriovDevicePlugin"] = {
                **_image(versions, "sriov-network-device-plugin"),
                "config": json.dumps(sriov_device_plugin_config(args.sriov_pkeys), indent=2) + "\n",
            }
        # Multus attaches the team NADs' ib-sriov interfaces; the reference plugins bring the
        # static/host-local IPAM those NADs use.
        multus_spec: dict[str, Any] = _image(versions, "multus-cni")
        if args.multus is not None:
            multus_spec["config"] = multus.config_json(net.namespace, args.multus)
        spec["secondaryNetwork"] = {"multus": multus_spec, "cniPlugins": _image(versions, "plugins")}
        if args.nv_ipam:
            # The nv-ipam webhook needs cert-manager, which gpuaas does not install.
            spec["nvIpam"] = {**_image(versions, "nvidia-k8s-ipam"), "enableWebhook": False}
    return {
        "apiVersion": API_VERSION,
        "kind": "NicClusterPolicy",
        "metadata": {
            "name": NAME,
            "labels": dict(PART_OF),
            "annotations": {"pulumi.com/waitFor": WAIT_FOR_READY},
        },
        "spec": spec,
    }


def rdma_physical_functions_only(args: NicClusterPolicyArgs) -> bool:
    """The shared RDMA pool takes physical functions only where team VF pools exist beside it."""
    return args.secondary_network and bool(args.sriov_pkeys)


def ib_sriov_cni_daemonset(network: Network, versions: Versions) -> Manifest:
    """The ib-sriov CNI installer DaemonSet (on-prem), after upstream's deployment manifest.

    Privileged and host-network like upstream; it writes ``/opt/cni/bin/ib-sriov`` on the host,
    the directory the Network Operator's Multus and CNI plugins use (chart ``cniBinDirectory``).
    """
    return kube.node_daemonset(
        network,
        IB_SRIOV_CNI,
        {
            "hostNetwork": True,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": IB_SRIOV_CNI,
                    "image": f"{versions.ib_sriov_cni_image}:{versions.ib_sriov_cni}",
                    "imagePullPolicy": "IfNotPresent",
                    "securityContext": {"privileged": True},
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "50Mi"},
                        "limits": {"cpu": "100m", "memory": "50Mi"},
                    },
                    "volumeMounts": [{"name": "cnibin", "mountPath": "/host/opt/cni/bin"}],
                }
            ],
            "volumes": [{"name": "cnibin", "hostPath": {"path": "/opt/cni/bin", "type": "DirectoryOrCreate"}}],
        },
        node_selector=network.node_selector,
    )


class NicClusterPolicy(pulumi.ComponentResource):
    """The NicClusterPolicy (``policy``, ready-awaited), before it gpuaas's NodeFeatureRule where
    the chart's is off, and on-prem the ib-sriov CNI installer and Multus' kubeconfig refresher
    (:mod:`components.fabric.multus_kubeconfig`).

    ``opts.depends_on`` should hold the Network Operator release: the policy's CRD comes with it.
    Later steps (GPU Operator, ib-node-config) depend on ``policy``.
    """

    policy: pulumi.CustomResource
    ib_sriov_cni: pulumi.CustomResource | None
    #: gpuaas's NodeFeatureRule where the chart's is off; the policy waits for it.
    node_feature_rule: pulumi.CustomResource | None

    def __init__(self, name: str, args: NicClusterPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:NicClusterPolicy", name, None, opts)
        after = kube.depends_on(opts)
        rule = node_feature_rule(args.network, azure_vfs=args.azure_vfs)
        # The rule's CRD comes with the release (NFD subchart); the policy after the rule, so the
        # DOCA driver's nodes are labelled by the time the operator renders its DaemonSet.
        self.node_feature_rule = (
            kube.apply(f"{name}-node-feature-rule", rule, kube.child(self, after)) if rule else None
        )
        before = [self.node_feature_rule] if self.node_feature_rule is not None else []
        policy = nic_cluster_policy(args)
        # The device-plugin pools follow the team P_Keys: a guarded fabric change waits.
        policy["spec"] = gated(args.gate, policy["spec"])
        self.policy = kube.apply(f"{name}-policy", policy, kube.child(self, [*after, *before]))
        self.ib_sriov_cni = None
        if args.secondary_network:
            self.ib_sriov_cni = kube.apply(
                f"{name}-ib-sriov-cni", ib_sriov_cni_daemonset(args.network, args.versions), kube.child(self, after)
            )
        # After the policy: the operator creates the ``multus`` ServiceAccount the refresher runs as.
        refresher = multus_kubeconfig.refresher(args.network, args.versions, args.multus)
        if refresher is not None:
            kube.apply(f"{name}-multus-kubeconfig", refresher, kube.child(self, [self.policy]))
        self.register_outputs({"policy": NAME})
