"""The plan's table of contents (``index.yaml``): which component and team own each file.

:mod:`components.plan.diff` groups a diff by it; :func:`resource_counts` is the summary's count
of what each component registered.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from components.plan.offline import Record, Run
from components.tenancy.labels import TEAM_LABEL

#: The plan's own table of contents: file → the component that owns it and its team, if any
#: (what ``components.plan.diff`` groups a diff by).
INDEX = "index.yaml"


def _team_of(
    record: Record, component: Record | None, teams: Mapping[str, str], by_ns: Mapping[str, str]
) -> str | None:
    """The team an object belongs to: its team label, its namespace, or its logical name.

    Logical names are ``<component>-<team>-…`` per team (STYLE.md); the longest team name wins
    so that team ``a-b`` is not taken for team ``a``. ``by_ns``: namespace → team.
    """
    meta: Mapping[str, Any] = record.inputs.get("metadata") or {}
    labels: Mapping[str, Any] = meta.get("labels") or {} if isinstance(meta, Mapping) else {}
    team_label = labels.get(TEAM_LABEL) if isinstance(labels, Mapping) else None
    if isinstance(team_label, str) and team_label in teams:
        return team_label
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    if isinstance(ns, str) and ns in by_ns:
        return by_ns[ns]
    prefix = f"{component.name}-" if component is not None else None
    if prefix is not None and record.name.startswith(prefix):
        rest = record.name[len(prefix) :]
        # Candidates end where the rest does or at a '-': a few lookups, whatever the team count.
        ends = [len(rest), *(i for i in range(len(rest) - 1, 0, -1) if rest[i] == "-")]
        for end in ends:
            if rest[:end] in teams:
                return rest[:end]
    return None


def plan_index(run: Run, owners: Mapping[str, Record]) -> dict[str, dict[str, str]]:
    """``{path: {component, team?}}`` for every object file; the stack's own files under ``stack``."""
    by_urn = {r.urn: r for r in run.records}
    out_teams = run.outputs.get("teams")
    teams = {
        str(t): str(v["namespace"])
        for t, v in (out_teams.items() if isinstance(out_teams, Mapping) else [])
        if isinstance(v, Mapping) and isinstance(v.get("namespace"), str)
    }
    by_ns = {ns: team for team, ns in teams.items()}
    index: dict[str, dict[str, str]] = {}
    for path, r in owners.items():
        chain = [r]
        while chain[-1].parent in by_urn:
            chain.append(by_urn[chain[-1].parent])
        top = chain[-2] if len(chain) >= 2 else None  # chain[-1] is Platform
        entry = {"component": (top or r).name.removeprefix(f"{chain[-1].name}-")}
        team = _team_of(r, top, teams, by_ns)
        if team is not None:
            entry["team"] = team
        index[path] = entry
    for path in ("opensm/partitions.conf", "opensm/opensm.conf"):
        index[path] = {"component": "opensm"}
    index["outputs.yaml"] = {"component": "stack"}
    index["summary.txt"] = {"component": "stack"}
    return {k: index[k] for k in sorted(index)}


def resource_counts(run: Run) -> dict[str, Counter[str]]:
    """Custom resources under each top-level component (children of Platform), by type."""
    by_urn = {r.urn: r for r in run.records}
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in run.records:
        if not r.custom:
            continue
        owner = r
        chain = [r]
        while owner.parent in by_urn:
            owner = by_urn[owner.parent]
            chain.append(owner)
        # chain[-1] is Platform; the component just below it owns the resource.
        top = chain[-2] if len(chain) >= 2 else chain[-1]
        label = top.name
        counts[label][r.type.rsplit(":", 1)[1]] += 1
    return dict(counts)
