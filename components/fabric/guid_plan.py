"""The VF GUID plan as ConfigMaps: a file per node, cut into shards below the object limit.

The GUIDs are :mod:`components.model.guids`'s arithmetic; the DaemonSet that applies them is
:mod:`components.fabric.sriov_host`'s (its docstring says why the plan is data, and how it is cut).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from components.k8s import Manifest
from components.model.capacity import sriov_partitions
from components.model.config import StackConfig
from components.model.fabric import Fabric
from components.model.guids import check_guids, node_guids, shard_size
from components.model.platform import Node, NodeGroup, OnPremPlatform
from components.model.resources import PART_OF
from components.model.teams import OnPremPartition
from components.model.types import colon_guid, full_member_pkey

GUIDS_CONFIG_MAP: Final = "gpuaas-vf-guids"
#: The team P_Key each VF index must show at ``pkeys/0`` before the device plugin is restarted.
PKEYS_CONFIG_MAP: Final = "gpuaas-vf-pkeys"
PKEYS_DIR: Final = "/etc/gpuaas/vf-pkeys"
PKEYS_KEY: Final = "pkeys"
CONFIG_HASH_ANNOTATION: Final = "gpuaas.io/config-hash"


def fleet(node_groups: Sequence[NodeGroup], nodes: Sequence[Node], fabric: Fabric) -> OnPremPlatform:
    """Node groups, nodes and fabric as the GUID arithmetic (:mod:`components.model.guids`) reads them:
    the on-prem platform section, from a component's own arguments."""
    return OnPremPlatform(kind="onprem", node_groups=list(node_groups), nodes=list(nodes), fabric=fabric)


def guid_table(onprem: OnPremPlatform, node: Node) -> str:
    """One node's plan: a line per HCA, ``<hca> <GUID of VF 0> <number of VFs>`` (colon form).

    VF ``n`` gets GUID of VF 0 plus ``n``: the VF index is the scheme's lowest field, and
    :func:`components.model.guids.node_guids` builds exactly that range.
    """
    return "".join(f"{hca} {colon_guid(guids[0])} {len(guids)}\n" for hca, guids in node_guids(onprem, node).items())


def guid_plan(cfg: StackConfig) -> dict[str, str]:
    """Every node's plan, keyed by node name (sorted); every GUID of the fleet checked unique."""
    return fleet_guid_plan(cfg.onprem) if cfg.onprem is not None else {}


def fleet_guid_plan(onprem: OnPremPlatform) -> dict[str, str]:
    """:func:`guid_plan` of one on-prem fleet (its node groups, nodes and fabric)."""
    check_guids(g for n in onprem.nodes for guids in node_guids(onprem, n).values() for g in guids)
    return {n.name: guid_table(onprem, n) for n in sorted(onprem.nodes, key=lambda n: n.name)}


def pkey_table(cfg: StackConfig) -> str:
    """``<vf index> <full-member P_Key> <team>`` per team partition, by VF index.

    What each team VF's ``pkeys/0`` reads once the subnet manager has programmed it: the team's
    key in the kernel's full-member form at index 0 (``indx0``, ``=full`` in partitions.conf;
    drivers/infiniband/core/sysfs.c prints ``0x%04x``), exactly what the device plugin's
    ``pKeys`` selector compares.
    """
    return partition_pkey_table(sriov_partitions(cfg))


def partition_pkey_table(partitions: Iterable[tuple[str, OnPremPartition]]) -> str:
    """:func:`pkey_table` of ``(team name, partition)`` pairs."""
    rows = sorted((part.vf_index, full_member_pkey(part.pkey), team) for team, part in partitions)
    return "".join(f"{vf} {key} {name}\n" for vf, key, name in rows)


def pkeys_config_map(cfg: StackConfig) -> Manifest:
    """The :func:`pkey_table` the VF pods wait for (one small ConfigMap for the fleet)."""
    return partition_pkeys_config_map(cfg.network.namespace, sriov_partitions(cfg))


def partition_pkeys_config_map(namespace: str, partitions: Iterable[tuple[str, OnPremPartition]]) -> Manifest:
    """:func:`pkeys_config_map` of ``(team name, partition)`` pairs, in ``namespace``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PKEYS_CONFIG_MAP, "namespace": namespace, "labels": dict(PART_OF)},
        "data": {PKEYS_KEY: partition_pkey_table(partitions)},
    }


def shard_name(onprem: OnPremPlatform, node: Node) -> str:
    """The ConfigMap holding ``node``'s plan: ``gpuaas-vf-guids-<group>-<id // shard size>``."""
    size = shard_size(onprem.groups_by_name[node.node_group])
    return f"{GUIDS_CONFIG_MAP}-{node.node_group}-{node.id // size}"


def guid_shards(cfg: StackConfig) -> dict[str, dict[str, str]]:
    """:func:`guid_plan` cut into ConfigMap-sized shards: shard name → node name → plan (all sorted)."""
    return fleet_guid_shards(cfg.onprem) if cfg.onprem is not None else {}


def fleet_guid_shards(onprem: OnPremPlatform) -> dict[str, dict[str, str]]:
    """:func:`guid_shards` of one on-prem fleet (its node groups, nodes and fabric)."""
    plan = fleet_guid_plan(onprem)
    shards: dict[str, dict[str, str]] = {}
    for node in sorted(onprem.nodes, key=lambda n: n.name):
        shards.setdefault(shard_name(onprem, node), {})[node.name] = plan[node.name]
    return dict(sorted(shards.items()))


def guid_config_maps(cfg: StackConfig, shards: Mapping[str, Mapping[str, str]] | None = None) -> list[Manifest]:
    """One ConfigMap per shard; the DaemonSet mounts them all into one directory.

    ``shards``: :func:`guid_shards` when the caller has them.
    """
    return shard_config_maps(cfg.network.namespace, guid_shards(cfg) if shards is None else shards)


def shard_config_maps(namespace: str, shards: Mapping[str, Mapping[str, str]]) -> list[Manifest]:
    """:func:`guid_config_maps` of :func:`fleet_guid_shards`, in ``namespace``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": shard, "namespace": namespace, "labels": dict(PART_OF)},
            "data": dict(data),
        }
        for shard, data in shards.items()
    ]


def config_hash(*texts: str) -> str:
    """Short digest of what a pod runs with: a change rolls the pods, nothing else does."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]
