"""Collisions between the names a config generates: one name, two owners, both paths in the message.

Two components configured into one namespace would both create (and on destroy both delete) its
Namespace object and apply objects over each other's; a team namespace that is an operator's
would put the team's quota and admission policy on the operator. The API server would accept
either, so the config must refuse them, naming both keys.
"""

from __future__ import annotations

from collections.abc import Iterator

from components.model import hami
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.resources import POOL_NAMESPACE
from components.rules.tenancy import RESERVED_NAMESPACES


def namespace_owners(cfg: StackConfig) -> list[tuple[str, str]]:
    """``(namespace, config path)`` of every namespace the stack creates, in config order.

    The verification pool namespace (:data:`components.proofs.targets.POOL_NAMESPACE`) and HAMi's
    (:data:`components.model.hami.NAMESPACE`) are fixed, so their owner is the program; they are
    listed whether or not pool proofs or HAMi are on, so that turning them on later cannot collide
    with a team (the plan writer's "two objects of the plan" check never runs on ``pulumi up``).
    """
    owners = [
        (cfg.network.namespace, "gpuaas:network.namespace"),
        (cfg.gpu_operator.namespace, "gpuaas:gpuOperator.namespace"),
        (POOL_NAMESPACE, f"the verification pool namespace (fixed {POOL_NAMESPACE!r})"),
        (hami.NAMESPACE, f"HAMi's namespace (fixed {hami.NAMESPACE!r})"),
    ]
    if cfg.queues.elastic:  # Kueue's namespace exists only with elastic quotas
        owners.append((cfg.queues.namespace, "gpuaas:queues.namespace"))
    for i, t in enumerate(cfg.teams):
        owners.append((t.ns, f"gpuaas:teams[{i}].{'namespace' if t.namespace is not None else 'name'}"))
    return owners


def namespace_collisions(cfg: StackConfig) -> Iterator[Issue]:
    """Each namespace claimed twice, reported at the later key with the earlier one named.

    Team-vs-team duplicates are the team rule's (``components.rules``), which already names both.
    """
    first: dict[str, str] = {}
    for ns, where in namespace_owners(cfg):
        other = first.setdefault(ns, where)
        if other == where:
            continue
        if other.startswith("gpuaas:teams[") and where.startswith("gpuaas:teams["):
            continue
        yield Issue(
            where if where.startswith("gpuaas:") else other,
            f"namespace {ns!r} is also {other if where.startswith('gpuaas:') else where}; every component and "
            "team needs a namespace of its own (one would create, and on destroy delete, the other's)",
        )


def foreign_namespaces(cfg: StackConfig) -> list[tuple[str, str, str]]:
    """``(namespace, config path, whose)`` of every namespace the config names that gpuaas does not
    create: the Prometheus stack's and Grafana's (observability on), and those of the operators
    trusted to create team pods (elastic queues)."""
    out: list[tuple[str, str, str]] = []
    o = cfg.observability
    if o.enabled:
        out.append((o.prometheus.namespace, "gpuaas:observability.prometheus.namespace", "the Prometheus stack's"))
        if o.grafana.namespace is not None:
            out.append((o.grafana.namespace, "gpuaas:observability.grafana.namespace", "Grafana's"))
    if cfg.queues.elastic:
        for j, c in enumerate(cfg.queues.controllers):
            ns = c.service_account.partition("/")[0]
            out.append(
                (ns, f"gpuaas:queues.controllers[{j}].serviceAccount", f"the trusted operator {c.service_account}'s")
            )
    return out


def foreign_namespace_collisions(cfg: StackConfig) -> Iterator[Issue]:
    """A namespace gpuaas creates that is also one it does not: each way, gpuaas reaches what it must not.

    ``network.namespace: monitoring`` makes gpuaas own the Prometheus stack's namespace (and
    ``pulumi destroy`` delete it); a team namespaced ``monitoring`` puts its RoleBinding, quota,
    LimitRange and admission policies on the monitoring stack;
    ``observability.prometheus.namespace: vision`` puts the platform's rules and monitors in a team's
    namespace, where the team can edit them; a team in a trusted operator's namespace can run pods
    as that operator's service account, which the queue guards trust. Reported at the key of the
    namespace gpuaas would create, naming the other.
    """
    foreign: dict[str, list[tuple[str, str]]] = {}
    for ns, key, whose in foreign_namespaces(cfg):
        foreign.setdefault(ns, []).append((key, whose))
    for ns, where in namespace_owners(cfg):
        for key, whose in foreign.get(ns, []):
            yield Issue(
                where if where.startswith("gpuaas:") else key,
                f"namespace {ns!r} is also {key if where.startswith('gpuaas:') else where}, {whose} namespace, "
                "which gpuaas does not create: gpuaas would own it (its quota, policies and bindings, and on "
                "destroy the namespace itself) and the two would reach each other's objects; give each its own",
            )


def reserved_namespaces(cfg: StackConfig) -> Iterator[Issue]:
    """A component configured into a namespace of the cluster itself (``kube-system``, ``default``, ...).

    The plan creates, labels and protects its components' namespaces, and ``pulumi destroy``
    deletes them: ``queues.namespace: kube-system`` would manage the cluster's own namespace and,
    on destroy, delete it. Teams have the same rule (``components.rules.tenancy``); the Network
    Operator's namespace its own (``components.rules.fabric``, Multus reads NADs there).
    """
    keys = [(cfg.gpu_operator.namespace, "gpuaas:gpuOperator.namespace")]
    if cfg.queues.elastic:
        keys.append((cfg.queues.namespace, "gpuaas:queues.namespace"))
    for ns, key in keys:
        if ns in RESERVED_NAMESPACES or ns.startswith("kube-"):
            yield Issue(
                key,
                f"{ns!r} is a namespace of the cluster itself (reserved: {', '.join(sorted(RESERVED_NAMESPACES))} "
                "and every kube-*); the plan creates, labels and on destroy deletes its components' namespaces: "
                "name one of the component's own",
            )


def proof_name_collisions(cfg: StackConfig) -> Iterator[Issue]:
    """A verifying team whose name is ``pool-<pool>`` while that pool's own proofs run.

    The proofs' logical names are ``<component>-<team>-<role>`` per team and
    ``<component>-pool-<pool>-<role>`` per AKS pool (components/proofs/verification.py ``targets``), so
    the two would register one URN twice, which the Pulumi engine refuses mid-run.
    """
    aks = cfg.aks
    if aks is None or not cfg.verification.aks_pools:
        return
    pools = {f"pool-{p.name}": j for j, p in enumerate(aks.gpu_pools)}
    for i, t in enumerate(cfg.teams):
        if t.verify and t.partition is not None and t.name in pools:
            yield Issue(
                f"gpuaas:teams[{i}].name",
                f"{t.name!r}: its proofs would take the names of gpuaas:platform.gpuPools[{pools[t.name]}]'s proofs "
                "(verification.aksPools is on); rename the team",
            )
