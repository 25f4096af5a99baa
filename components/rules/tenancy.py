"""Rules of the teams: unique names and namespaces, and quotas the fleet can hold."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from components.model import resources
from components.model.capacity import capacity, group_capacity, sharing_groups, team_requests
from components.model.config import StackConfig
from components.model.errors import Issue
from components.rules.common import config_key
from components.rules.hami import QUOTA_KEYS as HAMI_QUOTA_KEYS

#: Namespaces a team may not take: the cluster's own and the platform's operators.
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})

#: Kubernetes keeps the ``system:`` prefix for the groups it puts on its own users (Kubernetes docs,
#: "Authenticating": users and groups ``system:`` are reserved for Kubernetes system use; RBAC
#: "Default roles and role bindings"). Bound to a team's role, each hands the team's namespace,
#: and with ``privileged: true`` privileged pods, to principals outside the team.
SYSTEM_GROUPS = {
    "system:authenticated": "every signed-in user",
    "system:unauthenticated": "every anonymous request",
    "system:serviceaccounts": "every service account of every namespace",
    "system:masters": "the cluster's superusers (bypasses RBAC)",
    "system:nodes": "every kubelet",
    "system:bootstrappers": "node bootstrap tokens",
    "system:monitoring": "the API server's monitoring clients",
}
SERVICE_ACCOUNTS_OF = "system:serviceaccounts:"


def _teams(cfg: StackConfig) -> Iterator[Issue]:
    seen_names: dict[str, int] = {}
    seen_ns: dict[str, int] = {}
    for i, t in enumerate(cfg.teams):
        if t.name in seen_names:
            yield Issue(
                config_key(f"teams[{i}]", "name"), f"duplicate team {t.name!r} (also teams[{seen_names[t.name]}])"
            )
        seen_names.setdefault(t.name, i)
        key = "namespace" if t.namespace is not None else "name"
        if t.ns in seen_ns:
            yield Issue(
                config_key(f"teams[{i}]", key),
                f"namespace {t.ns!r} is already used by teams[{seen_ns[t.ns]}]; every team needs its own",
            )
        seen_ns.setdefault(t.ns, i)
        if t.ns in RESERVED_NAMESPACES or t.ns.startswith("kube-"):  # operator ones: components/rules/namespaces.py
            yield Issue(
                config_key(f"teams[{i}]", key), f"namespace {t.ns!r} is reserved for the cluster or its operators"
            )
        if t.verify and t.partition is None:
            yield Issue(config_key(f"teams[{i}]", "verify"), "the verification proofs need a partition on the team")


# --------------------------------------------------------------------------------------------
# Quotas against the fleet's capacity


_QUOTA_KEY = {resources.GPU: "gpus", resources.GPU_SHARED: "timeSlicedGpus"}


def _quota_key(resource: str) -> str:
    if resource in _QUOTA_KEY:
        return _QUOTA_KEY[resource]
    if resource in HAMI_QUOTA_KEYS:
        return HAMI_QUOTA_KEYS[resource]
    if resource.startswith("nvidia.com/mig-"):
        return f'mig["{resource.removeprefix("nvidia.com/mig-")}"]'
    return "rdma"


def _quotas(cfg: StackConfig) -> Iterator[Issue]:
    cap = capacity(cfg)
    gpu_kinds = {r for _w, g, sh, m in sharing_groups(cfg) for r in group_capacity(cfg, g, sh, m)}
    offered_mig = {k.removeprefix("nvidia.com/mig-") for k in cap if k.startswith("nvidia.com/mig-")}
    demand: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, t in enumerate(cfg.teams):
        if t.quota.mig and cfg.gpu_operator.mig_strategy == "single":
            yield Issue(
                config_key(f"teams[{i}].quota", "mig"),
                "per-profile MIG quotas need gpuOperator.migStrategy: mixed (single advertises MIG as nvidia.com/gpu)",
            )
            continue
        for profile in t.quota.mig:
            if profile not in offered_mig:
                yield Issue(
                    config_key(f"teams[{i}].quota", f'mig["{profile}"]'),
                    f"no node group offers MIG profile {profile!r}; "
                    f"offered: {', '.join(sorted(offered_mig)) or '(none)'}",
                )
        if t.quota.rdma and t.partition is None and cfg.network.rdma_shared_device_plugin == "none":
            yield Issue(
                config_key(f"teams[{i}].quota", "rdma"), "no RDMA resource exists: no partition and no shared plugin"
            )
        elif t.quota.rdma and t.partition is None and any(o.partition is not None for o in cfg.teams):
            # The shared RDMA device of a partitionless team reaches the fabric outside any team's
            # partition (on AKS: on whichever ND pool it lands, another team's partition); admission
            # refuses such pods too (components/tenancy/admission.py pool policy), this says so before apply.
            yield Issue(
                config_key(f"teams[{i}].quota", "rdma"),
                f"{t.quota.rdma}: a team without a partition may have no RDMA while other teams have partitions "
                "(its RDMA would share their fabric); allowed: 0, or give the team a partition",
            )
        for res, n in team_requests(cfg, i).items():
            demand[res].append((i, n))
    if cfg.quota_policy.allow_oversubscription:
        return
    for res, asks in sorted(demand.items()):
        if cfg.queues.elastic and res in gpu_kinds:
            continue  # elastic queues check the stricter per-node-group sums (components/model/elastic.py)
        total = sum(n for _, n in asks)
        have = cap.get(res, 0)
        if res.startswith("nvidia.com/mig-") and res.removeprefix("nvidia.com/mig-") not in offered_mig:
            continue  # reported above
        if total > have:
            who = ", ".join(f"{cfg.teams[i].name} {n}" for i, n in asks)
            where = f"teams[{asks[0][0]}].quota" if len(asks) == 1 else "teams[*].quota"
            yield Issue(
                config_key(where, _quota_key(res)),
                f"teams ask for {total} {res} ({who}); the fleet has {have}. Lower the quotas or set "
                "gpuaas:quotaPolicy.allowOversubscription: true",
            )


def _groups(cfg: StackConfig) -> Iterator[Issue]:
    """Groups that reach beyond the team: Kubernetes' own (``system:…``), except the team's own
    namespace's service accounts (``system:serviceaccounts:<its namespace>``).

    The stack's ``teams`` may be edited by a team lead in a pull request the platform plans: a
    group is only as narrow as the identity provider's, never one Kubernetes gives to everyone.
    """
    ns_keys = {
        t.ns: f"gpuaas:teams[{i}].{'namespace' if t.namespace is not None else 'name'}" for i, t in enumerate(cfg.teams)
    }
    for i, t in enumerate(cfg.teams):
        for j, group in enumerate(t.groups):
            key = config_key(f"teams[{i}]", f"groups[{j}]")
            own = f"{SERVICE_ACCOUNTS_OF}{t.ns}"
            if group == own or not group.startswith("system:"):
                continue
            if group.startswith(SERVICE_ACCOUNTS_OF):
                other = group.removeprefix(SERVICE_ACCOUNTS_OF)
                whose = f" ({ns_keys[other]})" if other in ns_keys else ""
                what = f"the service accounts of namespace {other!r}{whose}, not this team's {t.ns!r}"
            else:
                what = SYSTEM_GROUPS.get(group, "a group Kubernetes reserves for its own users")
            yield Issue(
                key,
                f"{group!r} is {what}: bound to the team's role it hands namespace {t.ns!r}"
                f"{', where privileged pods run,' if t.privileged else ''} to them. Allowed: the identity provider's "
                f"groups of the team, or {own!r} (the team's own service accounts)",
            )


def check(cfg: StackConfig) -> Iterator[Issue]:
    """Every team's name, namespace, groups and verify flag."""
    yield from _teams(cfg)
    yield from _groups(cfg)


def quota_issues(cfg: StackConfig) -> Iterator[Issue]:
    """Quotas the fleet cannot hold; :func:`components.rules.check` runs it once layouts and node groups are valid."""
    yield from _quotas(cfg)
