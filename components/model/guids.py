"""VF GUIDs: the deterministic identity of every VF on the fabric, and each partition's members.

Isolation between teams is the subnet manager's membership table keyed by port GUID: ib-sriov-cni
programs no P_Key, it only gives a VF a GUID (k8snetworkplumbingwg/ib-sriov-cni pkg/sriov/sriov.go),
and OpenSM puts that GUID into the partitions that list it. So GUIDs must be unique, non-zero,
stable across ``pulumi up`` and never chosen by a tenant. gpuaas derives them from the config alone:

    GUID = base | node.id << (hcaBits + vfBits) | hcaIndex << vfBits | vfIndex

``node.id`` is fixed per node (:class:`components.model.platform.Node`), the HCA index is the position in
the node group's ``hcas`` list, and the VF index is the one a team's partition is bound to. The
rules in :mod:`components.rules` keep every field within its bits and the base's low bits clear,
so two different (node, HCA, VF) triples never share a GUID; :func:`check_guids` re-checks the
rendered list anyway, because a duplicate or zero GUID in ``partitions.conf`` is a silent
isolation failure (OpenSM falls back to ``Default=0x7fff : ALL=full`` on a bad token).

The node GUID and the port GUID of a VF get the same value, as ib-sriov-cni does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from components.model.fabric import GuidScheme
from components.model.platform import Node, NodeGroup, OnPremPlatform
from components.model.types import colon_guid, format_guid

#: Highest usable 64-bit GUID + 1; all-ones (like all-zero) is rejected by ib-sriov-cni.
_ALL_ONES = 0xFFFF_FFFF_FFFF_FFFF


class GuidError(ValueError):
    """A GUID plan that would break isolation: duplicate, zero, all-ones or overflowing."""


def vf_guid(scheme: GuidScheme, node_id: int, hca_index: int, vf_index: int) -> int:
    """The GUID of VF ``vf_index`` on HCA ``hca_index`` of the node with ``node_id``."""
    for what, value, bits in (
        ("node id", node_id, scheme.node_bits),
        ("HCA index", hca_index, scheme.hca_bits),
        ("VF index", vf_index, scheme.vf_bits),
    ):
        if not 0 <= value < 1 << bits:
            raise GuidError(f"{what} {value} does not fit {bits} bits of the GUID scheme")
    low = scheme.hca_bits + scheme.vf_bits
    if scheme.base >> (low + scheme.node_bits) << (low + scheme.node_bits) != scheme.base:
        raise GuidError(f"GUID base {format_guid(scheme.base)} overlaps the node/HCA/VF bits")
    guid = scheme.base | node_id << low | hca_index << scheme.vf_bits | vf_index
    if not 0 < guid < _ALL_ONES:
        raise GuidError(f"{format_guid(guid)} is not a usable GUID (all-zero and all-ones are invalid)")
    return guid


def _sorted_nodes(onprem: OnPremPlatform) -> list[Node]:
    # By id: the order of ``platform.nodes`` in the stack file must not change any output.
    return sorted(onprem.nodes, key=lambda n: n.id)


def node_guids(onprem: OnPremPlatform, node: Node) -> dict[str, list[int]]:
    """GUIDs of every VF of ``node``: HCA name → GUID of VF 0, 1, … ``vfsPerHca - 1``."""
    group = onprem.groups_by_name[node.node_group]
    scheme = onprem.fabric.guid_scheme
    vfs = onprem.fabric.vfs_per_hca
    # The VF index is the lowest field: VF n is VF 0 + n. Checking the first and the last VF
    # checks every one between (fleet plans call this for every node).
    out: dict[str, list[int]] = {}
    for h, hca in enumerate(group.hcas):
        first, last = vf_guid(scheme, node.id, h, 0), vf_guid(scheme, node.id, h, vfs - 1)
        out[hca] = list(range(first, last + 1))
    return out


def partition_members(onprem: OnPremPlatform, vf_index: int) -> list[int]:
    """GUIDs of the VF ``vf_index`` on every HCA of every node: one partition's member list.

    Ordered by node id, then HCA index, so the rendered file does not depend on list order.
    """
    scheme = onprem.fabric.guid_scheme
    members = [
        vf_guid(scheme, node.id, h, vf_index)
        for node in _sorted_nodes(onprem)
        for h in range(len(onprem.groups_by_name[node.node_group].hcas))
    ]
    check_guids(members)
    return members


def check_guids(guids: Iterable[int]) -> None:
    """Raise :class:`GuidError` on a duplicate, zero or all-ones GUID."""
    seen: set[int] = set()
    for guid in guids:
        if not 0 < guid < _ALL_ONES:
            raise GuidError(f"{format_guid(guid)} is not a usable GUID (all-zero and all-ones are invalid)")
        if guid in seen:
            raise GuidError(f"GUID {format_guid(guid)} appears twice; every VF needs its own")
        seen.add(guid)


def vf_owner(onprem: OnPremPlatform, guid: int) -> tuple[str, int, int] | None:
    """``(node, HCA index, VF index)`` whose VF has ``guid`` under the GUID scheme, else ``None``.

    Arithmetic, not a table: it decodes the scheme's fields (fleets have millions of VFs).
    """
    scheme = onprem.fabric.guid_scheme
    low = scheme.hca_bits + scheme.vf_bits
    if guid >> (low + scheme.node_bits) << (low + scheme.node_bits) != scheme.base:
        return None
    node_id = (guid >> low) & ((1 << scheme.node_bits) - 1)
    hca = (guid >> scheme.vf_bits) & ((1 << scheme.hca_bits) - 1)
    vf = guid & ((1 << scheme.vf_bits) - 1)
    for node in onprem.nodes:
        group = onprem.groups_by_name.get(node.node_group)
        if node.id == node_id and group is not None and hca < len(group.hcas) and vf < onprem.fabric.vfs_per_hca:
            return node.name, hca, vf
    return None


# --------------------------------------------------------------------------------------------
# The GUID plan's size: what one node adds to a ConfigMap


#: ConfigMaps hold at most 1 MiB (etcd's request limit); leave room for metadata.
MAX_PLAN_BYTES: Final = 900 * 1024
#: A node name is a DNS subdomain: at most 253 characters, plus the ConfigMap key's share.
MAX_NODE_NAME: Final = 253
#: A plan line past the HCA name: `` 02:00:00:00:00:00:53:00 127\n`` at most (127 VFs per port).
LINE_CHARS: Final = len(f" {colon_guid(0)} 127\n")


def node_plan_bound(group: NodeGroup) -> int:
    """The most bytes one node of ``group`` adds to a shard: longest legal node name, every HCA line.

    Independent of the VF count: a line names VF 0's GUID and how many follow.
    """
    return MAX_NODE_NAME + sum(len(h) + LINE_CHARS for h in group.hcas)


def shard_size(group: NodeGroup) -> int:
    """Nodes per GUID-plan ConfigMap of ``group``: a power of two whose worst case fits; 0 if none does.

    Worst case, not actual size, so adding or renaming a node never moves another node to a
    different shard; only a change of the group's HCA list re-cuts its shards.
    """
    fit = MAX_PLAN_BYTES // node_plan_bound(group)
    return 1 << (fit.bit_length() - 1) if fit else 0
