"""What a change does to running pods, said before anything else in the summary and the plan diff.

The day-2 guards (:mod:`components.guards.mig`, :mod:`components.guards.fabric`) stop a disruptive
change until the config acknowledges it (``reconfigure: true``). Once acknowledged, the change
passes, and a reviewer reading the plan diff saw it only as a changed label or a changed field
somewhere in hundreds of lines: a MIG re-partition (every GPU pod of the group evicted), a VF
re-creation (every team's RDMA interface destroyed) or a moved partition. :func:`disruptions` names
each such change of ``cfg`` against the stack's last outputs, with the nodes to drain, so the
summary and the diff can put it at the top. :func:`guard_warnings` returns what the guards warn
about (a ``reconfigure`` left on after its change), which a run only logs.

Pure: both compare the config with the last run's outputs as the guards read them.
"""

from __future__ import annotations

from collections.abc import Mapping

from components.guards import fabric, mig
from components.model.capacity import layout_name, sharing_groups
from components.model.config import StackConfig
from components.model.teams import OnPremPartition
from components.model.types import format_pkey

#: How each line of :func:`disruptions` starts (after the summary's ``WARNING: ``).
DISRUPTIVE = "DISRUPTIVE: "


def _strings(value: object) -> dict[str, str]:
    """A last-run output as a map of strings; anything else compares as nothing (the guard says so)."""
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    return {}


def _shown(nodes: list[str]) -> str:
    return " ".join(nodes[:5]) + (f" … ({len(nodes)} nodes)" if len(nodes) > 5 else "")


def _mig(cfg: StackConfig, last: Mapping[str, object]) -> list[str]:
    before = _strings(last.get(mig.OUTPUT))
    out = []
    onprem = cfg.onprem
    for _where, name, sharing, model in sharing_groups(cfg):
        was = before.get(name)
        if was is None or mig.same_layout(was, sharing, model):
            continue
        out.append(
            f"{DISRUPTIVE}MIG re-partition of {name} from {was!r} to {layout_name(sharing)!r}. "
            f"{mig.how_to_drain(cfg, name)}"
        )
    for _i, node, group, was in mig.moved_nodes(cfg, before, _strings(last.get(mig.NODE_OUTPUT))):
        now = layout_name(onprem.groups_by_name[group]) if onprem is not None else "?"
        out.append(
            f"{DISRUPTIVE}MIG re-partition: node {node} moves into {group}, from {was!r} to {now!r}; its GPU pods "
            "are evicted: drain it first"
        )
    return out


def _fabric(cfg: StackConfig, last: Mapping[str, object]) -> list[str]:
    onprem = cfg.onprem
    before = _strings(last.get(fabric.OUTPUT))
    if onprem is None or not before:
        return []
    now = fabric.fabric_layout(cfg)
    every = f"all {len(onprem.nodes)} nodes: drain every RDMA node first"
    out = []
    if before.get("vfsPerHca", now["vfsPerHca"]) != now["vfsPerHca"]:
        out.append(
            f"{DISRUPTIVE}VF re-creation: vfsPerHca {before['vfsPerHca']} -> {now['vfsPerHca']} destroys every VF "
            f"(each team's RDMA interface) on {every}"
        )
    if before.get("guidScheme", now["guidScheme"]) != now["guidScheme"]:
        out.append(f"{DISRUPTIVE}VF re-binding: the GUID scheme changes every VF's GUID on {every}")
    for group in onprem.node_groups:
        was = before.get(f"groups.{group.name}.hcas")
        if was is not None and list(group.hcas)[: len(was.split())] != was.split():
            members = sorted(n.name for n in onprem.nodes if n.node_group == group.name)
            out.append(
                f"{DISRUPTIVE}VF re-binding: {group.name}'s HCAs change, so the VFs of {_shown(members)} get new "
                "GUIDs: drain them first"
            )
    for node in onprem.nodes:
        was = before.get(f"nodes.{node.name}.id")
        if was is not None and was != str(node.id):
            out.append(
                f"{DISRUPTIVE}VF re-binding: node {node.name}'s id {was} -> {node.id} gives its VFs new GUIDs: "
                "drain it first"
            )
    owner = {v: k.split(".")[1] for k, v in before.items() if k.startswith("teams.") and k.endswith(".vfIndex")}
    for team in cfg.teams:
        part = team.partition
        if not isinstance(part, OnPremPartition):
            continue
        pkey, vf = before.get(f"teams.{team.name}.pkey"), before.get(f"teams.{team.name}.vfIndex")
        moves = []
        if pkey is not None and pkey != format_pkey(part.pkey):
            moves.append(f"P_Key {pkey} -> {format_pkey(part.pkey)}")
        if vf is not None and vf != str(part.vf_index):
            moves.append(f"VF {vf} -> {part.vf_index}")
        taken = owner.get(str(part.vf_index))
        if taken is not None and taken != team.name:
            moves.append(f"VF {part.vf_index} was {taken}'s")
        if moves:
            out.append(
                f"{DISRUPTIVE}partition move: {team.name} ({', '.join(moves)}); its pods' RDMA interfaces change "
                f"partition: stop them first (kubectl -n {team.ns} get pods)"
            )
    return out


def disruptions(cfg: StackConfig, last: Mapping[str, object] | None) -> list[str]:
    """Each change of ``cfg`` against the last run's outputs that evicts pods or moves their VFs.

    ``[]`` on a first run or without outputs to compare with (the summary says the guards were not
    checked then).
    """
    if not last:
        return []
    return _mig(cfg, last) + _fabric(cfg, last)


def guard_warnings(cfg: StackConfig, last: Mapping[str, object] | None) -> list[str]:
    """The day-2 guards' warnings (a ``reconfigure`` left on after its change), which a run logs only."""
    if not last:
        return []
    _i, mig_warnings = mig.check(cfg, _strings(last.get(mig.OUTPUT)), _strings(last.get(mig.NODE_OUTPUT)))
    _j, fabric_warnings = fabric.check(cfg, _strings(last.get(fabric.OUTPUT)))
    return mig_warnings + fabric_warnings
