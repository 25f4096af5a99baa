"""NVIDIA Network Operator: its namespace and the Helm release (NFD + the operator itself).

The chart installs the operator and its CRDs but no NicClusterPolicy (network-operator v26.4.1
``values.yaml`` has no ``deployCR``), so :mod:`components.operators.nic_cluster_policy` creates the policy
once this release is up. Values follow Microsoft's AKS guide (Azure/aks-rdma-infiniband
``configs/values/network-operator/values.yaml``): chart defaults except the NFD rules switch.

The operator's admission webhook is kept **off** on purpose: its schema for the SR-IOV device
plugin's selectors (``webhook-schemas/net_device.json``) has ``additionalProperties: false`` and
does not list ``pKeys``, which gpuaas relies on to bind each team's VF pool to its partition (see
:mod:`components.operators.nic_cluster_policy`). Turning the webhook on would make the API server refuse
our NicClusterPolicy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import k8s as kube
from components.k8s import Manifest
from components.model import charts, resources
from components.model.network import Network
from components.model.resources import PART_OF, pod_security_labels
from components.model.versions import Versions

CHART = charts.NETWORK_OPERATOR
#: Helm release name; a contract (renaming it reinstalls the operator).
RELEASE = "network-operator"

#: Pod Security Admission levels of the operator namespace. Its DaemonSets (DOCA driver,
#: device plugins, Multus, ib-node-config) are privileged and use host namespaces/paths; the
#: AKS guide labels the namespace ``enforce=privileged`` (docs/01-network-operator.md).
POD_SECURITY_LABELS: dict[str, str] = pod_security_labels("privileged")


#: The chart's ``operator.cniNetworkDirectory`` default (network-operator values.yaml).
DEFAULT_CNI_NETWORK_DIRECTORY = "/etc/cni/net.d"


@dataclass(frozen=True, kw_only=True)
class NetworkOperatorArgs:
    """Arguments of :class:`NetworkOperator`. Ordering: ``opts.depends_on``, forwarded to every child."""

    network: Network = field(default_factory=Network)
    """The operator's namespace, its NodeFeatureRule switches and the Helm timeout (``gpuaas:network``)."""
    chart: charts.Source = field(
        default_factory=lambda: charts.source(charts.Charts(), charts.chart(Versions(), CHART))
    )
    """Where the network-operator chart comes from, at its pinned version (defaults to the public repository)."""
    cni_network_directory: str = DEFAULT_CNI_NETWORK_DIRECTORY
    """The nodes' CNI conf directory, where the operator writes Multus' conf (defaults to the chart's)."""
    azure_vfs: bool = False
    """Label Azure ND VMs' InfiniBand VFs (device ids 101c/101e) rather than the InfiniBand PCI class: the
    nodes are AKS ND pools, whose Ethernet VF is a Mellanox device too (defaults to on-prem's class match)."""


def namespace(network: Network) -> Manifest:
    """The operator namespace, Pod Security ``privileged``."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": network.namespace, "labels": {**PART_OF, **POD_SECURITY_LABELS}},
    }


#: The label the operator's DOCA driver DaemonSet requires on top of the policy's nodeAffinity.
MELLANOX_LABEL: Final = resources.MELLANOX_LABEL
MELLANOX_VENDOR: Final = "15b3"
#: PCI device ids of the InfiniBand VFs on Azure ND VMs: ConnectX-6 VF (101c, ND A100 v4) and
#: ConnectX-7 VF (101e, ND H100/H200 v5) — Azure/aks-rdma-infiniband
#: tests/setup-infra/network-operator-nfd.yaml. Not the chart's "vendor 15b3" alone: every Azure VM
#: with Accelerated Networking has a Mellanox Ethernet VF (ConnectX-4 Lx/5, class 0200), so the chart's
#: rule would label the System pool too and schedule the DOCA driver there; the guide turns it off.
AZURE_IB_VF_DEVICES: Final = ("101c", "101e")
#: PCI class of an InfiniBand controller (the chart's rule lists it beside Ethernet's 0200).
INFINIBAND_CLASS: Final = "0207"
NODE_FEATURE_RULE: Final = "gpuaas-mellanox-infiniband"


def node_feature_rule(network: Network, *, azure_vfs: bool) -> Manifest | None:
    """gpuaas's NodeFeatureRule labelling InfiniBand nodes, or ``None`` where the chart's rule runs.

    The DOCA driver DaemonSet selects on :data:`MELLANOX_LABEL` whatever the policy's nodeAffinity
    says; without the chart's rule and without this one no node has it, the driver is never
    scheduled, and the policy still reports ready (a state with no pods is ready). The rule is
    applied before the NicClusterPolicy. ``None`` with the chart's rules on, or when turned off
    (components/rules/fabric.py then checks that nothing needs the label).
    """
    net = network
    if net.deploy_node_feature_rules or not net.node_feature_rule:
        return None
    match: dict[str, Any] = {"vendor": {"op": "In", "value": [MELLANOX_VENDOR]}}
    if azure_vfs:
        match["device"] = {"op": "In", "value": list(AZURE_IB_VF_DEVICES)}
    else:
        match["class"] = {"op": "In", "value": [INFINIBAND_CLASS]}
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": NODE_FEATURE_RULE, "labels": dict(PART_OF)},
        "spec": {
            "rules": [
                {
                    "name": "gpuaas: Mellanox InfiniBand devices",
                    "labels": {MELLANOX_LABEL: "true"},
                    "matchFeatures": [{"feature": "pci.device", "matchExpressions": match}],
                }
            ]
        },
    }


def network_operator_values(args: NetworkOperatorArgs) -> dict[str, Any]:
    """Helm values of the network-operator chart (every path exists in the pinned values.yaml)."""
    return {
        "nfd": {
            # The operator's NFD labels Mellanox nodes (feature.node.kubernetes.io/pci-15b3.present),
            # which the NicClusterPolicy's nodeAffinity selects on by default.
            "enabled": True,
            "deployNodeFeatureRules": args.network.deploy_node_feature_rules,
        },
        "operator": {
            # Off (the chart default), written out because gpuaas depends on it: the webhook's
            # net_device.json refuses the ``pKeys`` selector that binds a VF pool to its partition.
            "admissionController": {"enabled": False},
            # Where the operator writes 00-multus.conf and Multus' kubeconfig: the directory the
            # container runtime reads CNI confs from (components/fabric/multus.py).
            "cniNetworkDirectory": args.cni_network_directory,
        },
    }


def node_affinity(network: Network) -> dict[str, Any]:
    """A required nodeAffinity equivalent to ``cfg.network.node_selector`` (keys sorted)."""
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": key, "operator": "In", "values": [value]}
                        for key, value in sorted(network.node_selector.items())
                    ]
                }
            ]
        }
    }


class NetworkOperator(pulumi.ComponentResource):
    """The Network Operator namespace and Helm release.

    ``release`` is what later steps depend on: the NicClusterPolicy CRD exists once it is up.
    """

    namespace: pulumi.CustomResource
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:NetworkOperator", name, None, opts)
        after = kube.depends_on(opts)
        net = args.network
        self.namespace = kube.apply(f"{name}-namespace", namespace(net), kube.child(self, after))
        self.release = kube.helm_release(
            f"{name}-release",
            args.chart,
            release=RELEASE,
            namespace=net.namespace,
            values=network_operator_values(args),
            timeout=net.helm_timeout_seconds,
            opts=kube.child(self, depends_on=[*after, self.namespace]),
        )
        self.register_outputs({"namespace": net.namespace, "release": self.release.name})
