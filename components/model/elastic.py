"""Elastic team quotas: what each team is guaranteed, may borrow and lends, per Kueue flavor.

Pure functions on a :class:`StackConfig` with ``queues.elastic: true``; :mod:`components.queueing.queues`
renders them as Kueue objects, :mod:`components.tenancy.quotas` as ResourceQuota ceilings,
:mod:`components.plan.summary` as a table. The model (Kueue v1beta2 ClusterQueue, peers.md "Kueue"):

* A **flavor** per node group (on-prem) or GPU pool (AKS): the GPU kinds that group offers
  (:func:`components.model.capacity.group_capacity`). One more flavor, :data:`ANY_NODE`, without node
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

from collections import defaultdict
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Final

from components.model import grammar, resources
from components.model.capacity import group_capacity, mib, sharing_groups, team_requests
from components.model.config import StackConfig
from components.model.memo import per_config, per_config_copied
from components.model.queues import QueueAmounts
from components.model.teams import AksPartition, Team

#: The flavor of cpu, memory and partition resources: no node labels, any node.
ANY_NODE: Final = "gpuaas-any-node"
CPU: Final = "cpu"
MEMORY: Final = "memory"

#: What the queues account: ``cpu``, ``memory``, the GPU kinds of the groups' flavors and the
#: team's partition resource (:func:`team_lines`). Kubernetes' other pod resources, local
#: ``ephemeral-storage`` and ``hugepages-<size>``, no team quota counts; Kueue refuses a workload
#: requesting a resource its ClusterQueue does not cover ("resource ... unavailable in
#: ClusterQueue", v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go), so a Job with a scratch
#: volume limit or huge pages would wait forever. Kueue drops these from the workload's requests
#: by prefix (``resources.excludeResourcePrefixes``, pkg/workload/workload.go
#: ``dropExcludedResources``: ``strings.HasPrefix``); none of them prefixes a resource the queues
#: cover (tests/queueing/test_kueue_release.py). Any other extended resource stays accounted: a
#: device the platform does not know is not handed out past the queue.
UNACCOUNTED_PREFIXES: Final = ("ephemeral-storage", "hugepages-")


# --------------------------------------------------------------------------------------------
# Quantities: one grammar everywhere (components/model/grammar.py, a port of apimachinery's parser)

#: Re-exported: the elastic arithmetic reads quantities with the loader's own parser, so a value the
#: config accepts (``1e3``, ``128`` unquoted, ``500u``) is never refused or misread here.
parse_quantity: Final = grammar.parse_quantity

#: Units :func:`format_quantity` writes, largest first within each family.
_SUFFIX: Final[dict[str, Decimal]] = {
    **{f"{s}i": Decimal(2) ** (10 * (n + 1)) for n, s in enumerate("KMGTPE")},
    "m": Decimal("0.001"),
    "u": Decimal("0.000001"),
    "n": Decimal("0.000000001"),
}


def format_quantity(value: Decimal, resource: str) -> str:
    """Canonical text: integers plain, CPU fractions in ``m``, memory in the largest exact binary unit."""
    if resource == MEMORY and value:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _SUFFIX[suffix]
            if value % unit == 0:
                return f"{int(value / unit)}{suffix}"
    if value == value.to_integral_value():
        return str(int(value))
    for suffix in ("m", "u", "n"):
        scaled = value / _SUFFIX[suffix]
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    # Below a nano: up, as Kubernetes rounds a quantity (a ceiling must not refuse what Kueue admits).
    return f"{int((value / _SUFFIX['n']).to_integral_value(rounding=ROUND_CEILING))}n"


# --------------------------------------------------------------------------------------------
# Flavors and the team's share in each


@dataclass(frozen=True)
class Line:
    """One resource of one flavor in a team's ClusterQueue. ``None`` limits are Kueue's "no limit"."""

    nominal: Decimal
    borrowing_limit: Decimal | None
    lending_limit: Decimal | None


def gpu_kind(resource: str) -> bool:
    """Whole GPUs, time-sliced shares, MIG instances and HAMi slices: what the groups' flavors carry."""
    return (
        resource in (resources.GPU, resources.GPU_SHARED)
        or resource.startswith("nvidia.com/mig-")
        or resource in resources.HAMI_RESOURCES
    )


@per_config_copied(lambda caps: {flavor: dict(kinds) for flavor, kinds in caps.items()})
def flavor_capacity(cfg: StackConfig) -> dict[str, dict[str, int]]:
    """GPU kinds each node group / GPU pool offers, in platform order (a flavor each)."""
    return {name: group_capacity(cfg, name, sharing, model) for _w, name, sharing, model in sharing_groups(cfg)}


def partition_pools(cfg: StackConfig) -> dict[str, str]:
    """AKS: pool → the team whose partition it is."""
    if cfg.aks is None:
        return {}
    return {t.partition.node_pool: t.name for t in cfg.teams if isinstance(t.partition, AksPartition)}


def unowned_pools(cfg: StackConfig) -> list[str]:
    """AKS: the GPU pools no team's partition owns, in platform order — where partitionless teams run."""
    if cfg.aks is None:
        return []
    owned = partition_pools(cfg)
    return [p.name for p in cfg.aks.gpu_pools if p.name not in owned]


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
    return _team_index(cfg)[team.name]


@per_config
def _team_index(cfg: StackConfig) -> dict[str, int]:
    """Team name → its index in ``teams`` (names are unique: a rule), first wins as before."""
    out: dict[str, int] = {}
    for i, t in enumerate(cfg.teams):
        out.setdefault(t.name, i)
    return out


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
    elif resource == resources.HAMI_GPU:
        value = limits.hami.gpus
    elif resource == resources.HAMI_MEMORY:
        value = None if limits.hami.memory is None else mib(limits.hami.memory)
    elif resource == resources.HAMI_CORES:
        value = limits.hami.cores
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


@per_config
def _lines_of(cfg: StackConfig) -> dict[int, dict[str, dict[str, Line]]]:
    """Each team's :func:`team_lines`, filled as asked (by the team object: a team of ``cfg.teams``)."""
    return {}


def team_lines(cfg: StackConfig, team: Team) -> dict[str, dict[str, Line]]:
    """flavor → resource → :class:`Line` of the team's ClusterQueue; GPU flavors first, then :data:`ANY_NODE`.

    Assumes the config passed :func:`check` (quantities parse). Computed once per team and config:
    the quotas, the queues and the summary each ask for every team's lines, some of them for every
    other team's too (:func:`team_rows`), and a plan must stay linear in teams (issue #21, item 14).
    """
    memo = _lines_of(cfg)
    if id(team) not in memo:
        memo[id(team)] = _team_lines(cfg, team)
    return {flavor: dict(lines) for flavor, lines in memo[id(team)].items()}


def _team_lines(cfg: StackConfig, team: Team) -> dict[str, dict[str, Line]]:
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
    # What the others of its cohort lend: the cohort's total less its own, each team's lines once,
    # not every other team's per team (quadratic in teams; issue #21, item 14). Decimal is exact.
    total = _cohort_lendable(cfg)
    mine = cohort(cfg, team)
    own = team_lines(cfg, team)
    lent = {
        (flavor, res): total.get((mine, flavor, res), Decimal(0)) - _own_share(cfg, team, flavor, res)
        for flavor, lines in own.items()
        for res in lines
    }
    out = []
    for flavor, lines in team_lines(cfg, team).items():
        for res, line in lines.items():
            can = min(ceiling[flavor][res], lent[(flavor, res)])
            if line.nominal or can:
                out.append((flavor, res, line, can))
    return out


@per_config
def _cohort_lendable(cfg: StackConfig) -> dict[tuple[str, str, str], Decimal]:
    """(cohort, flavor, resource) → what its teams lend there together."""
    acc: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for t in cfg.teams:
        for flavor, lines in team_lines(cfg, t).items():
            for res, line in lines.items():
                acc[(cohort(cfg, t), flavor, res)] += lendable(line)
    return dict(acc)


def _own_share(cfg: StackConfig, team: Team, flavor: str, res: str) -> Decimal:
    """What ``team`` and every team of the same name lends in ``flavor`` (``team_rows`` left out all of them)."""
    return sum(
        (
            lendable(line)
            for t in _same_name(cfg, team.name)
            if cohort(cfg, t) == cohort(cfg, team)
            for f, lines in team_lines(cfg, t).items()
            if f == flavor
            for r, line in lines.items()
            if r == res
        ),
        Decimal(0),
    )


@per_config
def _teams_by_name(cfg: StackConfig) -> dict[str, list[Team]]:
    out: dict[str, list[Team]] = defaultdict(list)
    for t in cfg.teams:
        out[t.name].append(t)
    return dict(out)


def _same_name(cfg: StackConfig, name: str) -> list[Team]:
    return _teams_by_name(cfg).get(name, [])


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
