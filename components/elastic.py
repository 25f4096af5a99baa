"""Elastic team quotas: what each team is guaranteed, may borrow and lends, per Kueue flavor.

Pure functions on a :class:`StackConfig` with ``queues.elastic: true``; :mod:`components.queues`
renders them as Kueue objects, :mod:`components.quotas` as ResourceQuota ceilings,
:mod:`components.summary` as a table. The model (Kueue v1beta2 ClusterQueue, peers.md "Kueue"):

* A **flavor** per node group (on-prem) or GPU pool (AKS): the GPU kinds that group offers
  (:func:`components.rules.group_capacity`). One more flavor, :data:`ANY_NODE`, without node
  labels, carries what is not tied to a group: ``cpu``, ``memory`` and the team's partition
  resource (on-prem its SR-IOV VF pool, on AKS the RDMA shared device).
* A team's ``quota`` is its **nominal** quota. Each GPU kind's nominal lives in the first of
  the team's node groups that offers it (:func:`home_flavors`); in its other groups the team has
  nominal 0 and can only borrow.
* **Borrowing** (``queue.borrowingLimit``, per kind and per group): absent means "whatever the
  cohort lends", which can never exceed the group's capacity. CPU and memory borrow nothing
  unless a limit is given: their fleet capacity is not in the config, so an unlimited CPU
  ceiling could not be bounded.
* **Lending** (``queue.lendingLimit``): absent means the whole nominal share.
* The partition resource is never lent or borrowed (limits 0), and no team's queue covers
  another team's partition resource: a VF of another partition would put the pod in it. On
  AKS a pool *is* a partition, so a partitioned team's queue has its own pool only, and no
  other team's queue lists that pool (peers.md: "no borrowing across AKS partitions").

Kueue does not read ResourceQuota (Kueue #696, #1403), so the ResourceQuota must let through
all Kueue can admit: its ceiling for a borrowable resource is nominal + borrowing limit, at most
the capacity of the team's groups (:func:`quota_ceilings`). The ceiling depends on the team and
the fleet only, never on another team, so adding a team still changes nothing of the others.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final

from components import resources
from components.config import AksPartition, QueueAmounts, StackConfig, Team
from components.errors import Issue
from components.rules import group_capacity, sharing_groups, team_requests

#: The flavor of cpu, memory and partition resources: no node labels, any node.
ANY_NODE: Final = "gpuaas-any-node"
CPU: Final = "cpu"
MEMORY: Final = "memory"

# --------------------------------------------------------------------------------------------
# Quantities (k8s.io/apimachinery pkg/api/resource: decimal SI and binary suffixes)

_SUFFIX: Final[dict[str, Decimal]] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{s: Decimal(10) ** (3 * (n + 1)) for n, s in enumerate("kMGTPE")},
    **{f"{s}i": Decimal(2) ** (10 * (n + 1)) for n, s in enumerate("KMGTPE")},
}
_QUANTITY: Final = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def parse_quantity(text: str) -> Decimal:
    """``"500m"`` → 0.5, ``"1536Gi"`` → bytes. Raises ValueError for anything else."""
    m = _QUANTITY.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 64, 500m, 512Gi)")
    try:
        return Decimal(m.group(1)) * _SUFFIX[m.group(2) or ""]
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"{text!r} is not a Kubernetes quantity") from None


def format_quantity(value: Decimal, resource: str) -> str:
    """Canonical text: integers plain, CPU fractions in ``m``, memory in the largest exact binary unit."""
    if resource == MEMORY and value:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _SUFFIX[suffix]
            if value % unit == 0:
                return f"{int(value / unit)}{suffix}"
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"


# --------------------------------------------------------------------------------------------
# Flavors and the team's share in each


@dataclass(frozen=True)
class Line:
    """One resource of one flavor in a team's ClusterQueue. ``None`` limits are Kueue's "no limit"."""

    nominal: Decimal
    borrowing_limit: Decimal | None
    lending_limit: Decimal | None


def gpu_kind(resource: str) -> bool:
    """Whole GPUs, time-sliced shares and MIG instances: what the groups' flavors carry."""
    return resource in (resources.GPU, resources.GPU_SHARED) or resource.startswith("nvidia.com/mig-")


def flavor_capacity(cfg: StackConfig) -> dict[str, dict[str, int]]:
    """GPU kinds each node group / GPU pool offers, in platform order (a flavor each)."""
    return {name: group_capacity(cfg, name, sharing, model) for _w, name, sharing, model in sharing_groups(cfg)}


def partition_pools(cfg: StackConfig) -> dict[str, str]:
    """AKS: pool → the team whose partition it is."""
    if cfg.aks is None:
        return {}
    return {t.partition.node_pool: t.name for t in cfg.teams if isinstance(t.partition, AksPartition)}


def team_flavors(cfg: StackConfig, team: Team) -> list[str]:
    """The GPU flavors of a team's queue, in its order of preference (see :class:`TeamQueue`)."""
    groups = list(flavor_capacity(cfg))
    chosen = [g for g in team.queue.node_groups if g in groups] if team.queue.node_groups else groups
    if cfg.aks is None:
        return chosen
    owned = partition_pools(cfg)
    if isinstance(team.partition, AksPartition):
        return [g for g in chosen if g == team.partition.node_pool]
    return [g for g in chosen if g not in owned]


def cohort(cfg: StackConfig, team: Team) -> str:
    return team.queue.cohort if team.queue.cohort is not None else cfg.queues.cohort


def _index(cfg: StackConfig, team: Team) -> int:
    return next(i for i, t in enumerate(cfg.teams) if t.name == team.name)


def home_flavors(cfg: StackConfig, team: Team) -> dict[str, str | None]:
    """Each GPU kind of the team's quota → the flavor holding its nominal (``None``: none offers it).

    With ``queue.nodeGroups`` the first listed group that offers the kind, else the largest.
    """
    caps = flavor_capacity(cfg)
    flavors = team_flavors(cfg, team)
    out: dict[str, str | None] = {}
    for res in sorted(team_requests(cfg, _index(cfg, team))):
        if not gpu_kind(res):
            continue
        offering = [f for f in flavors if res in caps[f]]
        if team.queue.node_groups or not offering:
            out[res] = offering[0] if offering else None
        else:
            # No preference given: the largest group offering the kind (ties: platform order), a
            # choice of the fleet alone, so another team's config never moves this team's share.
            out[res] = max(offering, key=lambda f: (caps[f][res], -offering.index(f)))
    return out


def _amount(limits: QueueAmounts, resource: str) -> Decimal | None:
    if resource == resources.GPU:
        value: int | str | None = limits.gpus
    elif resource == resources.GPU_SHARED:
        value = limits.time_sliced_gpus
    elif resource.startswith("nvidia.com/mig-"):
        value = limits.mig.get(resource.removeprefix("nvidia.com/mig-"))
    elif resource == CPU:
        value = limits.cpu
    elif resource == MEMORY:
        value = limits.memory
    else:
        return Decimal(0)  # the partition resource: never lent or borrowed
    if value is None:
        return None
    return parse_quantity(value) if isinstance(value, str) else Decimal(value)


def partition_resources(cfg: StackConfig, team: Team) -> list[str]:
    """The team's own partition resource(s), as its quota names them (VF pool or RDMA shared device)."""
    return sorted(r for r in team_requests(cfg, _index(cfg, team)) if not gpu_kind(r))


def team_lines(cfg: StackConfig, team: Team) -> dict[str, dict[str, Line]]:
    """flavor → resource → :class:`Line` of the team's ClusterQueue; GPU flavors first, then :data:`ANY_NODE`.

    Assumes the config passed :func:`check` (quantities parse).
    """
    caps = flavor_capacity(cfg)
    own = team_requests(cfg, _index(cfg, team))
    home = home_flavors(cfg, team)
    q = team.queue
    out: dict[str, dict[str, Line]] = {}
    for flavor in team_flavors(cfg, team):
        lines: dict[str, Line] = {}
        for res in sorted(caps[flavor]):
            nominal = Decimal(own[res]) if home.get(res) == flavor else Decimal(0)
            lend = _amount(q.lending_limit, res) if nominal else None
            lines[res] = Line(nominal, _amount(q.borrowing_limit, res), lend)
        out[flavor] = lines
    any_node = {
        CPU: Line(
            parse_quantity(team.quota.cpu), _amount(q.borrowing_limit, CPU) or Decimal(0), _amount(q.lending_limit, CPU)
        ),
        MEMORY: Line(
            parse_quantity(team.quota.memory),
            _amount(q.borrowing_limit, MEMORY) or Decimal(0),
            _amount(q.lending_limit, MEMORY),
        ),
    }
    for res in partition_resources(cfg, team):
        any_node[res] = Line(Decimal(own[res]), Decimal(0), Decimal(0))
    out[ANY_NODE] = any_node
    return out


def borrowable(cfg: StackConfig, team: Team) -> dict[str, dict[str, Decimal]]:
    """flavor → resource → most the team can hold beyond its nominal there (limit, else capacity left)."""
    caps = flavor_capacity(cfg)
    out: dict[str, dict[str, Decimal]] = {}
    for flavor, lines in team_lines(cfg, team).items():
        row: dict[str, Decimal] = {}
        for res, line in lines.items():
            if line.borrowing_limit is not None:
                row[res] = line.borrowing_limit
            else:
                row[res] = max(Decimal(caps.get(flavor, {}).get(res, 0)) - line.nominal, Decimal(0))
        out[flavor] = row
    return out


def lendable(line: Line) -> Decimal:
    return line.nominal if line.lending_limit is None else min(line.lending_limit, line.nominal)


def quota_ceilings(cfg: StackConfig, team: Team) -> dict[str, str]:
    """``spec.hard`` entries that replace the team's hard quota: nominal + borrowable per resource.

    ``requests.cpu``/``requests.memory`` and every GPU kind the team's queue
    covers; the partition resource keeps its plain quota (it is never borrowed).
    """
    total: dict[str, Decimal] = defaultdict(Decimal)
    extra = borrowable(cfg, team)
    for flavor, lines in team_lines(cfg, team).items():
        for res, line in lines.items():
            total[res] += line.nominal + extra[flavor][res]
    out: dict[str, str] = {}
    for res, value in total.items():
        if res == CPU:
            out["requests.cpu"] = (
                team.quota.cpu if value == parse_quantity(team.quota.cpu) else format_quantity(value, CPU)
            )
        elif res == MEMORY:
            text = team.quota.memory if value == parse_quantity(team.quota.memory) else format_quantity(value, MEMORY)
            out["requests.memory"] = text
        elif gpu_kind(res):
            out[f"requests.{res}"] = format_quantity(value, res)
    return out


def team_rows(cfg: StackConfig, team: Team) -> list[tuple[str, str, Line, Decimal]]:
    """(flavor, resource, line, borrowable now) where the team is guaranteed or can borrow something.

    Borrowable here is what the cohort can actually lend it: the team's own ceiling
    (:func:`borrowable`), at most what the other teams of its cohort lend in that flavor.
    """
    ceiling = borrowable(cfg, team)
    lent: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for other in cfg.teams:
        if other.name != team.name and cohort(cfg, other) == cohort(cfg, team):
            for flavor, lines in team_lines(cfg, other).items():
                for res, line in lines.items():
                    lent[(flavor, res)] += lendable(line)
    out = []
    for flavor, lines in team_lines(cfg, team).items():
        for res, line in lines.items():
            can = min(ceiling[flavor][res], lent[(flavor, res)])
            if line.nominal or can:
                out.append((flavor, res, line, can))
    return out


def cohort_totals(cfg: StackConfig) -> dict[tuple[str, str, str], tuple[str, Decimal, Decimal]]:
    """(cohort, flavor, resource) → (capacity text, guaranteed total, lendable total)."""
    caps = flavor_capacity(cfg)
    acc: dict[tuple[str, str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for t in cfg.teams:
        for flavor, lines in team_lines(cfg, t).items():
            for res, line in lines.items():
                if line.nominal:
                    acc[(cohort(cfg, t), flavor, res)][0] += line.nominal
                    acc[(cohort(cfg, t), flavor, res)][1] += lendable(line)
    return {
        key: (str(caps[key[1]].get(key[2], 0)) if key[1] in caps else "-", g, lend) for key, (g, lend) in acc.items()
    }


# --------------------------------------------------------------------------------------------
# Rules


def _p(*parts: str) -> str:
    return "gpuaas:" + ".".join(parts)


_KIND_KEY: Final = {resources.GPU: "gpus", resources.GPU_SHARED: "timeSlicedGpus"}


def _kind_key(resource: str) -> str:
    if resource in _KIND_KEY:
        return _KIND_KEY[resource]
    return f'mig["{resource.removeprefix("nvidia.com/mig-")}"]'


def _kind_resources(limits: QueueAmounts) -> Iterator[tuple[str, str, int]]:
    """(config key, resource, amount) of every GPU kind a limit names."""
    if limits.gpus is not None:
        yield "gpus", resources.GPU, limits.gpus
    if limits.time_sliced_gpus is not None:
        yield "timeSlicedGpus", resources.GPU_SHARED, limits.time_sliced_gpus
    for profile, n in sorted(limits.mig.items()):
        yield f'mig["{profile}"]', resources.mig_resource(profile), n


def check(cfg: StackConfig) -> Iterator[Issue]:
    """Every problem of the elastic-quota config, each naming its key."""
    q = cfg.queues
    if not q.elastic:
        return  # teams' queue keys stay in the file, unused: switching elasticity off is one line
    if cfg.quota_policy.allow_oversubscription:
        yield Issue(
            "gpuaas:quotaPolicy.allowOversubscription",
            "true, but queues.elastic is true: guaranteed (nominal) quotas must fit the fleet per node group; "
            "elastic queues lend idle GPUs instead of oversubscribing",
        )
    if q.preemption.reclaim_within_cohort == "Never" and q.preemption.borrow_within_cohort != "Never":
        # The ClusterQueue CRD's own rule: "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never".
        yield Issue(
            "gpuaas:queues.preemption.borrowWithinCohort",
            f"{q.preemption.borrow_within_cohort}, but reclaimWithinCohort is Never: Kueue allows preempting "
            "while borrowing only where lent quota can be reclaimed",
        )
    seen_classes: dict[str, int] = {}
    for j, pc in enumerate(q.priority_classes):
        if pc.name in seen_classes:
            yield Issue(_p(f"queues.priorityClasses[{j}]", "name"), f"duplicate priority class {pc.name!r}")
        seen_classes.setdefault(pc.name, j)
    caps = flavor_capacity(cfg)
    for where, name, _s, _m in sharing_groups(cfg):
        if name == ANY_NODE:
            yield Issue(
                _p(where, "name"), f"{name!r} is the name of gpuaas's flavor for cpu and memory; rename the group"
            )
    owned = partition_pools(cfg)
    nominal: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for i, t in enumerate(cfg.teams):
        yield from _team(cfg, i, t, caps, owned, nominal)
    for (flavor, res), asks in sorted(nominal.items()):
        total, have = sum(n for _, n in asks), caps[flavor].get(res, 0)
        if total > have:
            who = ", ".join(f"{cfg.teams[i].name} {n}" for i, n in asks)
            where = f"teams[{asks[0][0]}].quota" if len(asks) == 1 else "teams[*].quota"
            yield Issue(
                _p(where, _kind_key(res)),
                f"teams are guaranteed {total} {res} in node group {flavor!r} ({who}); it has {have}. Lower the "
                "quotas, or move a team's share with teams[].queue.nodeGroups (the first listed group that offers "
                "a kind holds the team's quota of it)",
            )


def _team(
    cfg: StackConfig,
    i: int,
    t: Team,
    caps: dict[str, dict[str, int]],
    owned: dict[str, str],
    nominal: dict[tuple[str, str], list[tuple[int, int]]],
) -> Iterator[Issue]:
    tq = t.queue
    base = f"teams[{i}]"
    for j, g in enumerate(tq.node_groups):
        where = _p(f"{base}.queue", f"nodeGroups[{j}]")
        if g not in caps:
            yield Issue(where, f"{g!r} is not a node group or GPU pool; allowed: {', '.join(caps)}")
        elif tq.node_groups.index(g) != j:
            yield Issue(where, f"duplicate {g!r}")
        elif isinstance(t.partition, AksPartition) and g != t.partition.node_pool:
            yield Issue(
                where,
                f"{g!r} is not the team's partition (pool {t.partition.node_pool!r}): on AKS a pool is an InfiniBand "
                "partition, and a GPU borrowed there would join another partition; list only the team's own pool",
            )
        elif cfg.aks is not None and not isinstance(t.partition, AksPartition) and g in owned:
            yield Issue(
                where,
                f"{g!r} is the partition of team {owned[g]!r}: a pod there would join that team's InfiniBand partition",
            )
    quantities: dict[str, Decimal] = {}
    for key, text in (("cpu", t.quota.cpu), ("memory", t.quota.memory)):
        try:
            quantities[key] = parse_quantity(text)
        except ValueError as e:
            yield Issue(_p(f"{base}.quota", key), str(e))
    for limit_key, limits in (("borrowingLimit", tq.borrowing_limit), ("lendingLimit", tq.lending_limit)):
        for key in ("cpu", "memory"):
            text = getattr(limits, key)
            if text is None:
                continue
            try:
                value = parse_quantity(text)
            except ValueError as e:
                yield Issue(_p(f"{base}.queue.{limit_key}", key), str(e))
                continue
            if limit_key == "lendingLimit" and key in quantities and value > quantities[key]:
                yield Issue(
                    _p(f"{base}.queue.{limit_key}", key),
                    f"{text} is above the team's quota {getattr(t.quota, key)} (a team lends only what it is "
                    "guaranteed)",
                )
    flavors = team_flavors(cfg, t)
    fleet = {res for cap in caps.values() for res in cap}
    own = team_requests(cfg, i)
    for limit_key, limits in (("borrowingLimit", tq.borrowing_limit), ("lendingLimit", tq.lending_limit)):
        for key, res, n in _kind_resources(limits):
            where = _p(f"{base}.queue.{limit_key}", key)
            if res.startswith("nvidia.com/mig-") and res not in fleet:
                # A limit on a kind the team cannot use is harmless (the fleet may change under it),
                # but a MIG profile no group offers at all is most likely a misspelt one.
                offered = sorted(r.removeprefix("nvidia.com/mig-") for r in fleet if r.startswith("nvidia.com/mig-"))
                yield Issue(
                    where,
                    f"no node group offers MIG profile {res.removeprefix('nvidia.com/mig-')!r}; "
                    f"offered: {', '.join(offered) or '(none)'}",
                )
            elif limit_key == "lendingLimit" and n > own.get(res, 0):
                yield Issue(
                    where,
                    f"{n} is above the team's quota of {own.get(res, 0)} {res} "
                    "(a team lends only what it is guaranteed)",
                )
    for res, flavor in home_flavors(cfg, t).items():
        if flavor is not None:
            nominal[(flavor, res)].append((i, own[res]))
        elif res in fleet:  # a kind no group offers at all is reported by the quota rules
            why = (
                f"its partition's pool {t.partition.node_pool!r} does not"
                if isinstance(t.partition, AksPartition)
                else f"none of its node groups ({', '.join(flavors) or 'none'}) does"
            )
            yield Issue(
                _p(f"{base}.quota", _kind_key(res)), f"the team is guaranteed {own[res]} {res}, but {why} offer it"
            )
