"""Collisions between the names a config generates: one name, two owners, both paths in the message.

Two components configured into one namespace would both create (and on destroy both delete) its
Namespace object and apply objects over each other's; a team namespace that is an operator's
would put the team's quota and admission policy on the operator. The API server would accept
either, so the config must refuse them, naming both keys.
"""

from __future__ import annotations

from collections.abc import Iterator

from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.resources import POOL_NAMESPACE
from components.rules.tenancy import RESERVED_NAMESPACES


def namespace_owners(cfg: StackConfig) -> list[tuple[str, str]]:
    """``(namespace, config path)`` of every namespace the stack creates, in config order.

    The verification pool namespace (:data:`components.proofs.targets.POOL_NAMESPACE`) is fixed, so
    its owner is the program; it is listed whether or not pool proofs are on, so that turning
    them on later cannot collide with a team.
    """
    owners = [
        (cfg.network.namespace, "gpuaas:network.namespace"),
        (cfg.gpu_operator.namespace, "gpuaas:gpuOperator.namespace"),
        (POOL_NAMESPACE, f"the verification pool namespace (fixed {POOL_NAMESPACE!r})"),
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
