"""Day-2 guard for the fabric: a change that moves VFs under running pods needs an acknowledgement.

Three config values decide which VF a pod's RDMA traffic uses and which partition it is in:

* ``platform.fabric.vfsPerHca``: the VF script sets ``sriov_numvfs`` to 0 and back on every HCA
  of every node when it changes (the kernel refuses to change a non-zero count), which destroys
  every VF, each team's RDMA interface, under its pods (:mod:`components.fabric.sriov_host`);
  ``platform.fabric.guidScheme`` likewise gives every VF a new GUID, and the script unbinds and
  rebinds each VF to apply it;
* a team's ``partition.vfIndex``: its partition's members become VF ``n`` of every HCA, so the
  SM takes the old VFs' GUIDs out of the partition (the team's running pods lose their network)
  and, when another team takes the old index, puts them in that team's partition: a running pod
  of one team on another team's fabric;
* a team's ``partition.pkey``: the partition and the device-plugin pool (``nvidia.com/sriov800N``)
  of the team's VFs change under its running pods;
* a node's ``id`` or a node group's ``hcas`` (other than HCAs appended at the end): the node or
  HCA index is a field of every VF GUID (:mod:`components.model.guids`), so those VFs are re-bound
  with new GUIDs.

Like :mod:`components.guards.mig`, whose mechanism this reuses: the stack exports
:data:`OUTPUT` (these values, as a flat map of strings), the next run reads it back through the
self-``StackReference`` (offline: ``--previous``) and :func:`check` compares. A change without
``fabric.reconfigure: true`` (fleet-wide values) or the team's ``partition.reconfigure: true``
stops the run before the GUID plan, the P_Key table, partitions.conf or the NicClusterPolicy is
sent, naming the key, what moves, and how to drain. A flag left on after its change is warned
about. New teams (on VF indices no team had) and a stack's first run pass.
"""

from __future__ import annotations

from collections.abc import Mapping

from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.resources import sriov_resource
from components.model.teams import OnPremPartition
from components.model.types import format_pkey

#: The stack output holding the fabric values the last run applied.
OUTPUT: str = "fabricLayout"
_VFS = "vfsPerHca"
_SCHEME = "guidScheme"


def fabric_layout(cfg: StackConfig) -> dict[str, str]:
    """The values :func:`check` guards, as the flat map of strings the stack exports (``{}`` on AKS).

    Keys: ``vfsPerHca``, ``guidScheme``, per team with a partition ``teams.<team>.pkey`` and
    ``teams.<team>.vfIndex`` (team names are DNS labels: no dots, so no key collides), per node
    group ``groups.<group>.hcas`` and per node ``nodes.<node>.id`` (node names may hold dots; the
    key is read back by its prefix only).
    """
    onprem = cfg.onprem
    if onprem is None:
        return {}
    f = onprem.fabric
    s = f.guid_scheme
    out = {
        _VFS: str(f.vfs_per_hca),
        _SCHEME: f"base=0x{s.base:016x} nodeBits={s.node_bits} hcaBits={s.hca_bits} vfBits={s.vf_bits}",
    }
    for team in sorted(cfg.teams, key=lambda t: t.name):
        if isinstance(team.partition, OnPremPartition):
            out[f"teams.{team.name}.pkey"] = format_pkey(team.partition.pkey)
            out[f"teams.{team.name}.vfIndex"] = str(team.partition.vf_index)
    for group in sorted(onprem.node_groups, key=lambda g: g.name):
        out[f"groups.{group.name}.hcas"] = " ".join(group.hcas)
    for node in sorted(onprem.nodes, key=lambda n: n.name):
        out[f"nodes.{node.name}.id"] = str(node.id)
    return out


def _drain_nodes(cfg: StackConfig) -> str:
    selector = ",".join(f"{k}={v}" for k, v in sorted(cfg.network.node_selector.items()))
    return (
        f"First `kubectl cordon -l {selector}` and `kubectl drain -l {selector} --ignore-daemonsets "
        "--delete-emptydir-data` (every RDMA node)"
    )


def check(cfg: StackConfig, previous: Mapping[str, str] | None) -> tuple[list[Issue], list[str]]:
    """(issues that stop the run, warnings) for ``cfg`` against the fabric values of the last run.

    ``previous``: the last run's :data:`OUTPUT`; ``None`` or empty on a first run (or on a stack
    whose last run predates this guard), which passes.
    """
    onprem = cfg.onprem
    before = previous or {}
    if onprem is None or not before:
        return [], []
    issues: list[Issue] = []
    warnings: list[str] = []
    now = fabric_layout(cfg)
    fabric = onprem.fabric
    nodes = len(onprem.nodes)
    fleet_changed = False
    for key, what in (
        (_VFS, "sets sriov_numvfs to 0 and back on every HCA, destroying every VF"),
        (_SCHEME, "gives every VF a new GUID and unbinds/rebinds it, and moves every partition's members"),
    ):
        was = before.get(key)
        if was is None or was == now[key]:
            continue
        fleet_changed = True
        if not fabric.reconfigure:
            issues.append(
                Issue(
                    f"gpuaas:platform.fabric.{key}",
                    f"changes from {was!r} to {now[key]!r}, which {what} on all {nodes} nodes under running pods "
                    f"(every team's RDMA interfaces). {_drain_nodes(cfg)}, then set "
                    "gpuaas:platform.fabric.reconfigure: true for this run (and back to false after)",
                )
            )
    for i, group in enumerate(onprem.node_groups):
        was = before.get(f"groups.{group.name}.hcas")
        if was is None:
            continue
        old, new = was.split(), list(group.hcas)
        if new[: len(old)] == old:
            continue  # unchanged, or HCAs appended: no existing HCA index moves
        fleet_changed = True
        if not fabric.reconfigure:
            members = sorted(n.name for n in onprem.nodes if n.node_group == group.name)
            issues.append(
                Issue(
                    f"gpuaas:platform.nodeGroups[{i}].hcas",
                    f"changes {group.name}'s HCAs from [{', '.join(old)}] to [{', '.join(new)}]: an HCA's position "
                    f"is a field of its VFs' GUIDs, so the VFs of {len(members)} nodes get new GUIDs under running "
                    f"pods (append new HCAs at the end instead). First `kubectl drain` those nodes "
                    "(--ignore-daemonsets --delete-emptydir-data), then set gpuaas:platform.fabric.reconfigure: true "
                    "for this run (and back to false after)",
                )
            )
    for i, node in enumerate(onprem.nodes):
        was = before.get(f"nodes.{node.name}.id")
        if was is None or was == str(node.id):
            continue
        fleet_changed = True
        if not fabric.reconfigure:
            issues.append(
                Issue(
                    f"gpuaas:platform.nodes[{i}].id",
                    f"changes {node.name}'s id from {was} to {node.id}: the id is a field of its VFs' GUIDs, so "
                    f"every VF of {node.name} gets a new GUID under running pods. First `kubectl drain {node.name} "
                    "--ignore-daemonsets --delete-emptydir-data`, then set gpuaas:platform.fabric.reconfigure: true "
                    "for this run (and back to false after)",
                )
            )
    if fabric.reconfigure and not fleet_changed:
        warnings.append(
            "gpuaas:platform.fabric.reconfigure is true but vfsPerHca, guidScheme, node ids and HCA lists are "
            "unchanged; set it back to false so the next VF re-creation is reviewed"
        )
    # VF index -> team, as the last run bound them.
    owner_before = {v: k.split(".")[1] for k, v in before.items() if k.startswith("teams.") and k.endswith(".vfIndex")}
    for i, team in enumerate(cfg.teams):
        part = team.partition
        if not isinstance(part, OnPremPartition):
            continue
        where = f"gpuaas:teams[{i}].partition"
        drain = (
            f"First stop the team's pods that use it (`kubectl -n {team.ns} get pods` requesting "
            f"{sriov_resource(part.pkey)} or the old pool), then set {where}.reconfigure: true for this run "
            "(and back to false after)"
        )
        changed = False
        old_pkey = before.get(f"teams.{team.name}.pkey")
        if old_pkey is not None and old_pkey != format_pkey(part.pkey):
            changed = True
            if not part.reconfigure:
                issues.append(
                    Issue(
                        f"{where}.pkey",
                        f"changes {team.name}'s partition from {old_pkey} to {format_pkey(part.pkey)}: its VFs "
                        "leave the old partition and device-plugin pool under its running pods. " + drain,
                    )
                )
        old_vf = before.get(f"teams.{team.name}.vfIndex")
        vf = str(part.vf_index)
        if old_vf is not None and old_vf != vf:
            changed = True
            if not part.reconfigure:
                issues.append(
                    Issue(
                        f"{where}.vfIndex",
                        f"moves {team.name}'s partition from VF {old_vf} to VF {vf} of every HCA: the subnet "
                        f"manager drops the VF-{old_vf} GUIDs the team's running pods use from its partition. " + drain,
                    )
                )
        previous_owner = owner_before.get(vf)
        if previous_owner is not None and previous_owner != team.name:
            changed = True
            if not part.reconfigure:
                issues.append(
                    Issue(
                        f"{where}.vfIndex",
                        f"VF {vf} of every HCA was {previous_owner}'s in the last run; binding it to {team.name} "
                        f"puts any pod of {previous_owner} still using it into {team.name}'s partition. First make "
                        f"sure no pod of {previous_owner} uses VF {vf} any more, then set {where}.reconfigure: true "
                        "for this run (and back to false after)",
                    )
                )
        if part.reconfigure and not changed:
            warnings.append(
                f"{where}.reconfigure is true but {team.name}'s pkey and vfIndex are unchanged; set it back to false "
                "so the next change of its partition is reviewed"
            )
    return sorted(set(issues)), warnings
