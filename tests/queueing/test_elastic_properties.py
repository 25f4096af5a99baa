"""Properties of elastic quotas over generated configs (hypothesis).

For any config the loader accepts, read from the rendered ClusterQueues (what Kueue is given):
guaranteed (nominal) quotas never exceed a flavor's capacity; no team's queue covers another
team's partition resource, and its own is never lent or borrowed; on AKS a pool that is a team's
partition appears in that team's queue only. Refused configs must be refused with a
path-qualified issue, never an exception.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components import platform_args
from components.loader import parse_config
from components.model import elastic, resources
from components.model.errors import ConfigError
from components.model.teams import AksPartition
from components.queueing import queues
from components.tenancy import quotas
from tests import kueue_objects
from tests.conftest import raw_stack

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GROUPS = ("h100-mig", "h100-shared", "h100-full")
PROFILES = ("1g.10gb", "4g.40gb")


def _limits(draw: st.DrawFn, quota: dict[str, Any], kinds: tuple[str, ...], lending: bool) -> dict[str, Any]:
    """Limits on some of ``kinds``; lending limits mostly within the quota (sometimes above: refused)."""

    def amount(have: int) -> int:
        return (
            draw(st.integers(0, have + (1 if draw(st.integers(0, 9)) == 0 else 0)))
            if lending
            else draw(st.integers(0, 40))
        )

    out: dict[str, Any] = {}
    for kind in kinds:
        if not draw(st.booleans()):
            continue
        if kind == "mig":
            out["mig"] = {p: amount(quota.get("mig", {}).get(p, 0)) for p in PROFILES if draw(st.booleans())}
        elif kind == "cpu":
            out["cpu"] = draw(st.sampled_from(["0", "8", "500m", "64"]))
        else:
            out[kind] = amount(quota.get(kind, 0))
    return out


def _queue(draw: st.DrawFn, quota: dict[str, Any], groups: list[str], kinds: tuple[str, ...]) -> dict[str, Any]:
    q: dict[str, Any] = {}
    if draw(st.booleans()):
        q["borrowingLimit"] = _limits(draw, quota, kinds, lending=False)
    if draw(st.booleans()):
        q["lendingLimit"] = _limits(draw, quota, kinds, lending=True)
    if draw(st.booleans()):
        q["nodeGroups"] = draw(st.permutations(groups))
    elif draw(st.integers(0, 4)) == 0:
        q["nodeGroups"] = draw(st.lists(st.sampled_from([*groups, "nope"]), max_size=3, unique=True))
    if draw(st.booleans()):
        q["cohort"] = draw(st.sampled_from(["gpuaas", "research"]))
    return q


@st.composite
def onprem_configs(draw: st.DrawFn) -> dict[str, Any]:
    raw = raw_stack("onprem")
    for t in raw["teams"]:
        quota = {"rdma": t["quota"].get("rdma", 0)}
        if draw(st.booleans()):
            quota["gpus"] = draw(st.integers(0, 6))
        if draw(st.booleans()):
            quota["timeSlicedGpus"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            quota["mig"] = {p: draw(st.integers(0, 4)) for p in PROFILES}
        t["quota"] = quota
        t["queue"] = _queue(draw, quota, list(GROUPS), ("gpus", "timeSlicedGpus", "mig", "cpu"))
    return raw


@st.composite
def aks_configs(draw: st.DrawFn) -> dict[str, Any]:
    raw = raw_stack("aks")
    raw.setdefault("queues", {})["elastic"] = True
    raw["platform"]["gpuPools"].append({"name": "ndh100c", "maxCount": draw(st.integers(1, 3))})
    taken: set[str] = set()
    pools = ["ndh100a", "ndh100b", "ndh100c"]
    teams = []
    for i in range(draw(st.integers(1, 4))):
        team: dict[str, Any] = {"name": f"team{i}", "quota": {"gpus": draw(st.integers(0, 12))}}
        free = [p for p in ("ndh100a", "ndh100b") if p not in taken]
        if free and draw(st.booleans()):
            team["partition"] = {"nodePool": draw(st.sampled_from(free))}
            taken.add(team["partition"]["nodePool"])
        own = [team["partition"]["nodePool"]] if "partition" in team else ["ndh100c"]
        team["queue"] = _queue(draw, team["quota"], own if draw(st.integers(0, 4)) else pools, ("gpus", "cpu"))
        teams.append(team)
    raw["teams"] = teams
    return raw


def _accepted(raw: dict[str, Any]) -> Any:
    try:
        return parse_config(raw)
    except ConfigError as e:
        assert e.issues and all(i.path.startswith("gpuaas:") for i in e.issues)
        return None


def _check(cfg: Any) -> None:
    caps = elastic.flavor_capacity(cfg)
    partition_of: dict[str, str] = {}
    for t in cfg.teams:
        for res in elastic.partition_resources(cfg, t):
            if not res.startswith("rdma/"):  # AKS's RDMA device is per pool; the pool is the partition
                partition_of[res] = t.name
    owned_pools = {t.partition.node_pool: t.name for t in cfg.teams if isinstance(t.partition, AksPartition)}
    nominal: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for t in cfg.teams:
        cq = kueue_objects.cluster_queue(cfg, t)
        hard = quotas.quota_hard(cfg, t)
        for group in cq["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                name = flavor["name"]
                if name in owned_pools:
                    assert owned_pools[name] == t.name, f"{t.name} lists {owned_pools[name]}'s partition pool {name}"
                for r in flavor["resources"]:
                    res, n = r["name"], elastic.parse_quantity(r["nominalQuota"])
                    if name in caps:
                        nominal[(name, res)] += n
                        assert elastic.parse_quantity(hard[f"requests.{res}"]) >= n
                    if res in partition_of or res.startswith("rdma/"):
                        assert partition_of.get(res, t.name) == t.name, f"{t.name} covers {partition_of[res]}'s {res}"
                        assert r.get("borrowingLimit") == "0" and r.get("lendingLimit") == "0"
    for (flavor, res), n in nominal.items():
        assert n <= caps[flavor].get(res, 0), f"{flavor} {res}: guaranteed {n} > capacity {caps[flavor].get(res, 0)}"


@PROPS
@given(onprem_configs())
def test_onprem_guarantees_fit_and_partitions_stay_private(raw: dict[str, Any]) -> None:
    cfg = _accepted(raw)
    if cfg is not None:
        _check(cfg)


@PROPS
@given(aks_configs())
def test_aks_guarantees_fit_and_no_queue_enters_another_partition(raw: dict[str, Any]) -> None:
    cfg = _accepted(raw)
    if cfg is not None:
        _check(cfg)


def test_generators_reach_accepted_configs() -> None:
    """The properties are not vacuous: the checked-in shapes are accepted and checked."""
    _check(parse_config(raw_stack("onprem")))
    raw = raw_stack("aks")
    raw["queues"] = {"elastic": True}
    _check(parse_config(raw))
    assert resources.GPU in elastic.flavor_capacity(parse_config(raw))["ndh100a"]


@pytest.mark.parametrize("gone", range(6))
def test_removing_a_team_leaves_every_other_teams_queue_and_ceiling_alone(gone: int) -> None:
    """Stable by construction: a team's share, limits and ceilings depend on it and the fleet only."""
    full = parse_config(raw_stack("onprem"))
    raw = raw_stack("onprem")
    del raw["teams"][gone]
    less = parse_config(raw)
    before, after = queues.queue_objects(platform_args.queues(full)), queues.queue_objects(platform_args.queues(less))
    name = full.teams[gone].name
    assert set(before) - set(after) == {f"{name}-cluster-queue", f"{name}-local-queue"}
    assert all(after[role] == before[role] for role in after)
    for t in less.teams:
        old = next(o for o in full.teams if o.name == t.name)
        assert quotas.quota_hard(less, t) == quotas.quota_hard(full, old)
