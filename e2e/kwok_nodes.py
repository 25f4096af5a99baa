"""The Node object KWOK plays the kubelet of: how the e2e registers a simulated node.

KWOK (sigs.k8s.io/kwok v0.8.0, started by :class:`e2e.controlplane.ControlPlane` with
``kwok=True``) manages the Nodes that carry its annotation; :func:`kwok_node` builds one with the
capacity and allocatable a test gives (tests/e2e/fleet_nodes.py computes them per stack).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The annotation KWOK manages nodes by (--manage-nodes-with-annotation-selector), and its value.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"


def kwok_node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: Sequence[dict[str, str]] = (),
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node that KWOK manages (``kwok.x-k8s.io/node: fake``), with ``capacity`` and
    ``allocatable`` (default: the capacity) on top of 32 CPUs, 256 GiB and 110 pods.

    Create it with :meth:`Kube.create`; KWOK's node-initialize stage then keeps the status's
    capacity and allocatable as created (extended resources such as ``nvidia.com/gpu`` included)
    and sets the conditions Ready. The status is written on create: the API server keeps a Node's
    status from a create (its status subresource is not reset on create).
    """
    cap = {"cpu": "32", "memory": "256Gi", "pods": "110", **(capacity or {})}
    alloc = {**cap, **(allocatable or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE, **(annotations or {})},
        },
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": {"capacity": cap, "allocatable": alloc},
    }
