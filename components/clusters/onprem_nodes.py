"""Node labels that select each node's MIG layout and device-plugin config.

The GPU Operator's MIG Manager applies the mig-parted config named by ``nvidia.com/mig.config``
and the device plugin/GFD the config key named by ``nvidia.com/device-plugin.config``
(GPU Operator docs, "GPU Operator with MIG" and "Time-Slicing GPUs in Kubernetes"). On-prem the
nodes exist already, so :class:`OnPremNodes` patches them; AKS pools carry the same labels through
the AgentPool's ``node_labels`` (:func:`pool_labels`), which AKS re-applies to every node it adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pulumi

from components import k8s as kube
from components.guards.gate import gated
from components.model import resources
from components.model.capacity import device_plugin_config_name, layout_name
from components.model.config import StackConfig
from components.model.platform import GpuPool, Node, NodeGroup
from components.model.sharing import GpuSharing

#: The device-plugin config key of a node (NVIDIA/k8s-device-plugin README, "Multiple configs").
DEVICE_PLUGIN_CONFIG_LABEL: Final = resources.DEVICE_PLUGIN_CONFIG_LABEL
#: Every label gpuaas owns on a GPU node; nothing else on a node is touched.
OWNED_LABELS: Final = resources.OWNED_NODE_LABELS


def group_labels(group: str, sharing: GpuSharing) -> dict[str, str]:
    """The labels of every node of one node group or GPU pool.

    A HAMi group's nodes also say so (``gpuaas.io/hami`` and HAMi's own ``gpu=on``, what HAMi's device
    plugin selects) and turn
    the GPU Operator's device plugin, MIG Manager and validator off (``nvidia.com/gpu.deploy.*=false``, which
    the Operator keeps): HAMi's device plugin advertises those GPUs instead, and MIG stays off
    (HAMi's FAQ: turn the Operator's device plugin off on HAMi nodes).
    """
    labels = {
        resources.MIG_CONFIG_LABEL: layout_name(sharing),
        DEVICE_PLUGIN_CONFIG_LABEL: device_plugin_config_name(group),
        resources.NODE_GROUP_LABEL: group,
    }
    if sharing.hami is not None and sharing.hami.driver == "devicePlugin":
        labels.update(
            {
                **resources.HAMI_NODE_LABELS,
                resources.GPU_DEPLOY_DEVICE_PLUGIN_LABEL: "false",
                resources.GPU_DEPLOY_MIG_MANAGER_LABEL: "false",
                # The Operator's validator would wait for an nvidia.com/gpu* resource HAMi does not
                # advertise; HAMi's node validation runs its driver and toolkit checks instead
                # (components/operators/hami.py node_validation_daemonset).
                resources.GPU_DEPLOY_OPERATOR_VALIDATOR_LABEL: "false",
            }
        )
    return labels


def labels_by_node(node_groups: Sequence[NodeGroup], nodes: Sequence[Node]) -> dict[str, dict[str, str]]:
    """Our labels per node, by node name, from the node groups and the nodes that join them.

    A node naming no group of ``node_groups`` is refused by name (the stack config's rules refuse
    it earlier, with its key; a program building :class:`OnPremNodesArgs` by hand meets this).
    """
    groups = {g.name: g for g in node_groups}
    unknown = [n for n in nodes if n.node_group not in groups]
    if unknown:
        raise ValueError(
            "; ".join(f"node {n.name!r} names node group {n.node_group!r}" for n in unknown)
            + f": not one of the node groups given ({', '.join(sorted(groups)) or 'none'})"
        )
    return {n.name: group_labels(n.node_group, groups[n.node_group]) for n in nodes}


def node_labels(cfg: StackConfig) -> dict[str, dict[str, str]]:
    """Our labels per on-prem node, by node name (``{}`` on AKS, whose pools label their nodes)."""
    onprem = cfg.onprem
    if onprem is None:
        return {}
    return labels_by_node(onprem.node_groups, onprem.nodes)


def pool_labels(cfg: StackConfig, pool: GpuPool) -> dict[str, str]:
    """Our labels for an AKS GPU pool's ``node_labels``; merge them over ``pool.labels`` so they win.

    Takes the whole config, like :func:`node_labels`, so a label that comes to depend on a stack-wide
    setting does not change the caller; today the pool alone decides.
    """
    del cfg
    return group_labels(pool.name, pool)


def node_patch(node: str, labels: dict[str, str]) -> dict[str, Any]:
    """The NodePatch body: only ``metadata.name`` and our labels, applied by force.

    ``pulumi.com/patchForce`` takes the labels over from another field manager: the GPU Operator
    writes ``nvidia.com/mig.config=<migManager.config.default>`` on MIG-capable nodes that lack it,
    and an operator may have labelled a node by hand before gpuaas managed it.
    """
    return {
        "metadata": {
            "name": node,
            "labels": dict(labels),
            "annotations": {"pulumi.com/patchForce": "true"},
        }
    }


@dataclass(frozen=True, kw_only=True)
class OnPremNodesArgs:
    """Arguments of :class:`OnPremNodes`.

    Ordering: ``opts.depends_on`` should hold the ConfigMaps the labels name (the GPU Operator's
    mig-parted and device-plugin configs): MIG Manager marks a node ``nvidia.com/mig.config.state=failed``
    when the named config does not exist yet. It is forwarded to every NodePatch.
    """

    node_groups: tuple[NodeGroup, ...] = ()
    """The node groups (``platform.nodeGroups``): each one's GPU sharing decides its nodes' MIG layout,
    device-plugin config and HAMi labels."""
    nodes: tuple[Node, ...] = ()
    """The nodes to label (``platform.nodes``), each joining one of ``node_groups`` by name; one
    NodePatch each. None: nothing is labelled."""
    gate: pulumi.Output[bool] | None = None
    """The day-2 guards (:mod:`components.guards`; the MIG guard): the labels wait for them, so a MIG
    layout change stops before a node is relabelled. ``None``: no guard."""


class OnPremNodes(pulumi.ComponentResource):
    """One ``NodePatch`` per configured node, owning only the labels in :data:`OWNED_LABELS`.

    NodePatch is server-side apply (the provider is created with ``enable_server_side_apply=True``
    in :mod:`components.platform`): Pulumi becomes the field manager of exactly the fields it sends,
    so kubelet, NFD/GFD and the operators keep their labels, and deleting a patch removes only ours.
    The logical name is ``<name>-<node name>``, so reordering ``platform.nodes`` moves nothing.
    ``opts.depends_on`` (the ConfigMaps the labels name) reaches every patch.
    """

    patches: dict[str, pulumi.CustomResource]

    def __init__(self, name: str, args: OnPremNodesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:OnPremNodes", name, None, opts)
        after = kube.depends_on(opts)
        self.patches = {}
        for node, labels in labels_by_node(args.node_groups, args.nodes).items():
            body = node_patch(node, labels)
            self.patches[node] = kube.apply_patch(
                f"{name}-{node}",
                {"apiVersion": "v1", "kind": "Node", "metadata": gated(args.gate, body["metadata"])},
                # Dropping a node from config leaves its labels as they are: deleting the patch
                # would remove nvidia.com/mig.config, the GPU Operator would apply its default
                # (all-disabled) and reset the node's GPUs under its pods.
                opts=pulumi.ResourceOptions.merge(
                    kube.child(self, after), pulumi.ResourceOptions(retain_on_delete=True)
                ),
            )
        self.register_outputs({"nodes": sorted(self.patches)})
