"""Rules of elastic quotas (``gpuaas:queues.elastic``): guarantees that fit each flavor, limits that make sense.

The model they check is :mod:`components.model.elastic`'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from typing import Final

from components.model import dra, resources
from components.model.capacity import mib, mig_counts, sharing_groups, team_requests
from components.model.config import StackConfig
from components.model.elastic import (
    ANY_NODE,
    flavor_capacity,
    home_flavors,
    parse_quantity,
    partition_pools,
    team_flavors,
)
from components.model.errors import Issue
from components.model.queues import BUILT_IN, QueueAmounts
from components.model.teams import AksPartition, Team
from components.rules.common import config_key
from components.rules.hami import QUOTA_KEYS as HAMI_QUOTA_KEYS

_KIND_KEY: Final = {resources.GPU: "gpus", resources.GPU_SHARED: "timeSlicedGpus"}

#: Kueue v0.19.2 refuses a Configuration with more (pkg/config/validation.go
#: ``validateDeviceClassMappings``: ``field.TooMany(resources.deviceClassMappings, n, 16)``), and
#: its manager then does not start.
KUEUE_MAX_DEVICE_CLASS_MAPPINGS: Final = 16


def _kind_key(resource: str) -> str:
    if resource in _KIND_KEY:
        return _KIND_KEY[resource]
    if resource in HAMI_QUOTA_KEYS:
        return HAMI_QUOTA_KEYS[resource]
    return f'mig["{resource.removeprefix("nvidia.com/mig-")}"]'


def _kind_resources(limits: QueueAmounts) -> Iterator[tuple[str, str, int]]:
    """(config key, resource, amount) of every GPU kind a limit names."""
    if limits.gpus is not None:
        yield "gpus", resources.GPU, limits.gpus
    if limits.time_sliced_gpus is not None:
        yield "timeSlicedGpus", resources.GPU_SHARED, limits.time_sliced_gpus
    for profile, n in sorted(limits.mig.items()):
        yield f'mig["{profile}"]', resources.mig_resource(profile), n
    h = limits.hami
    for key, res, amount in (
        ("hami.gpus", resources.HAMI_GPU, h.gpus),
        ("hami.memory", resources.HAMI_MEMORY, None if h.memory is None else mib(h.memory)),
        ("hami.cores", resources.HAMI_CORES, h.cores),
    ):
        if amount is not None:
            yield key, res, amount


def check(cfg: StackConfig) -> Iterator[Issue]:
    """Every problem of the elastic-quota config, each naming its key."""
    q = cfg.queues
    if not q.elastic:
        return  # teams' queue keys stay in the file, unused: switching elasticity off is one line
    if "batch/job" not in q.integrations:
        yield Issue(
            "gpuaas:queues.integrations",
            f"{list(q.integrations)} leaves out batch/job while queues.elastic is true: Kueue would ignore Jobs, "
            "so a team's GPU Job (and every verification Job, which goes through its team's queue) would run "
            "outside its queue, unsuspended and uncounted; keep batch/job in the list",
        )
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
            yield Issue(config_key(f"queues.priorityClasses[{j}]", "name"), f"duplicate priority class {pc.name!r}")
        seen_classes.setdefault(pc.name, j)
    yield from _controllers(cfg)
    yield from _device_class_mappings(cfg)
    caps = flavor_capacity(cfg)
    for where, name, _s, _m in sharing_groups(cfg):
        if name == ANY_NODE:
            yield Issue(
                config_key(where, "name"),
                f"{name!r} is the name of gpuaas's flavor for cpu and memory; rename the group",
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
                config_key(where, _kind_key(res)),
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
        where = config_key(f"{base}.queue", f"nodeGroups[{j}]")
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
            yield Issue(config_key(f"{base}.quota", key), str(e))
    for limit_key, limits in (("borrowingLimit", tq.borrowing_limit), ("lendingLimit", tq.lending_limit)):
        for key in ("cpu", "memory"):
            text = getattr(limits, key)
            if text is None:
                continue
            try:
                value = parse_quantity(text)
            except ValueError as e:
                yield Issue(config_key(f"{base}.queue.{limit_key}", key), str(e))
                continue
            if limit_key == "lendingLimit" and key in quantities and value > quantities[key]:
                yield Issue(
                    config_key(f"{base}.queue.{limit_key}", key),
                    f"{text} is above the team's quota {getattr(t.quota, key)} (a team lends only what it is "
                    "guaranteed)",
                )
    flavors = team_flavors(cfg, t)
    fleet = {res for cap in caps.values() for res in cap}
    own = team_requests(cfg, i)
    for limit_key, limits in (("borrowingLimit", tq.borrowing_limit), ("lendingLimit", tq.lending_limit)):
        for key, res, n in _kind_resources(limits):
            where = config_key(f"{base}.queue.{limit_key}", key)
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
                config_key(f"{base}.quota", _kind_key(res)),
                f"the team is guaranteed {own[res]} {res}, but {why} offer it",
            )


def _controllers(cfg: StackConfig) -> Iterator[Issue]:
    """``queues.controllers``: operators' identities, never a team's, each once, for operator kinds."""
    team_ns = {t.ns: t.name for t in cfg.teams}
    seen: set[str] = set()
    for j, c in enumerate(cfg.queues.controllers):
        base = f"queues.controllers[{j}]"
        namespace = c.service_account.partition("/")[0]
        if namespace in team_ns:
            yield Issue(
                config_key(base, "serviceAccount"),
                f"{c.service_account!r} is in team {team_ns[namespace]!r}'s namespace: a team's own identity may not "
                "act as a workload controller (it could create pods Kueue never gates); run the operator in a "
                "namespace of its own",
            )
        if c.service_account in seen:
            yield Issue(config_key(base, "serviceAccount"), f"duplicate {c.service_account!r}")
        seen.add(c.service_account)
        for k, integration in enumerate(c.integrations):
            if integration in BUILT_IN:
                yield Issue(
                    config_key(base, f"integrations[{k}]"),
                    f"{integration}: the children of {integration} workloads are created by Kubernetes' own "
                    "controllers (trusted by gpuaas already), never by an operator; allowed here: "
                    "jobset.x-k8s.io/jobset, kubeflow.org/pytorchjob, kubeflow.org/mpijob",
                )


def _device_class_mappings(cfg: StackConfig) -> Iterator[Issue]:
    """DRA with elastic quotas: Kueue counts each DeviceClass through one mapping, at most 16."""
    mappings = dra.kueue_device_class_mappings(cfg)
    if len(mappings) <= KUEUE_MAX_DEVICE_CLASS_MAPPINGS:
        return
    path = "gpuaas:gpuOperator.dra.dynamicMig"
    if not dra.dynamic_mig(cfg):
        profiles: set[str] = set()
        for where, _name, sharing, model in sharing_groups(cfg):
            try:
                profiles |= set(mig_counts(sharing, model))
            except (KeyError, ValueError):
                continue
            if 1 + len(profiles) > KUEUE_MAX_DEVICE_CLASS_MAPPINGS:
                path = config_key(where, "mig", "layout" if sharing.mig.layout is not None else "profiles")
                break
    offered = ", ".join(dra.offered_mig_profiles(cfg))
    yield Issue(
        path,
        f"Kueue would need {len(mappings)} resources.deviceClassMappings (gpu.nvidia.com and one per MIG profile "
        f"offered: {offered}); Kueue v0.19.2 accepts at most {KUEUE_MAX_DEVICE_CLASS_MAPPINGS} "
        "(pkg/config/validation.go) and would not start. Offer at most "
        f"{KUEUE_MAX_DEVICE_CLASS_MAPPINGS - 1} MIG profiles across the node groups, or turn queues.elastic off",
    )
