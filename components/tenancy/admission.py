"""Admission guards for team pods (ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1).

**Networks** (every platform): a pod in a team namespace may attach only NADs of its own
namespace, and may not choose its own InfiniBand GUID. Multus ``namespaceIsolation`` alone is not
enough: it keeps ``default`` (and ``globalNamespaces``) open, and a pod can put ``cni-args``
(ib-sriov-cni reads ``guid`` there) or ``infiniband-guid`` in its network-selection element —
with SM partitions keyed by GUID, a chosen GUID is a way into another team's partition
(ib-kubernetes README, "predefined Guid in cni-args"). The annotation is a string and CEL has
no JSON parser, so the checks of the JSON form are string checks made sound by first limiting
its alphabet; the comma form is split exactly as Multus splits it:

1. JSON form: printable ASCII, no backslash — so no JSON escape (``"n\\u0061mespace"``) and no
   non-ASCII letter that Go's case-insensitive key matching folds to ASCII (``ſ`` → ``s``, ``K`` → ``k``);
2. no ``cni-args`` / ``infiniband-guid`` key, any case (Go's encoding/json matches keys to struct
   fields case-insensitively);
3. JSON form: every key is one of :data:`ALLOWED_KEYS`, spelled exactly (found by matching whole
   JSON strings from the left, so a list like ``["10.0.0.1", "::1"]`` is not misread as a key);
4. JSON form: every ``"namespace"`` value is the pod's own namespace, ``""`` or ``null`` (Multus
   reads an empty namespace as the pod's);
5. comma form (``a, ns/b@if``): an item with ``/`` names the pod's own namespace, or none, once
   trimmed as Multus trims it (``strings.TrimSpace``, which CEL's ``trim()`` is): ``vision /x`` is
   ``vision``'s. Any character may appear there: Multus matches names against an ASCII pattern;
6. no ``v1.multus-cni.io/default-network`` annotation (a NAD as the pod's primary network).

Multus treats the annotation as JSON when it contains any of ``[{"`` (multus-cni
pkg/k8sclient ``parsePodNetworkAnnotation``); :data:`IS_JSON` mirrors that. :func:`networks_violations`
is a Python mirror of the same expressions, built from the same regular expressions, for tests.
Multus' own parser is the judge in tests/e2e/test_multus_attaches_only_what_admission_admits.py:
thousands of generated annotations, each sent to the real API server and parsed by Multus' code.

**Networks stay as admitted** (every platform): Multus reads the annotations whenever it sets up
the pod's sandbox (multus-cni v4.3.0 ``pkg/multus/multus.go``), which happens again after a node
reboot or a sandbox loss, so a value changed after CREATE would be used without ever passing the
checks above (ib-sriov-cni takes the VF GUID from ``cni-args``, ``getGUIDFromConf``). A second
policy refuses any UPDATE of a team pod (``pods`` and ``pods/status``: annotations can be written
through either) that adds, removes or changes the networks or default-network annotation. It is
a policy of its own, not more checks on the first, so that a later, stricter CREATE check never
blocks the status updates of pods admitted before it (kubelet and Multus update ``pods/status``).

**Partitions** (on-prem): a pod may request a partition resource (``nvidia.com/sriov*``, in any
container list, requests or limits) only if it is its own namespace's, named by the namespace
label :data:`components.tenancy.labels.PARTITION_LABEL`. This is what keeps a team off another team's VF
pool; quotas list only the team's own partition resource, so adding a team changes no other
team's objects (:mod:`components.tenancy.quotas`). The binding matches every namespace: a namespace without
the label (no team, or a team without a partition) may request none.

**Node pool** (AKS): a team's partition is its ND pool, so a team pod that requests a GPU or RDMA
resource in any container (``containers``, ``initContainers`` — native sidecars included — and
``ephemeralContainers``) must select that pool (``nodeSelector``
``kubernetes.azure.com/agentpool=<pool>``, or a required node affinity pinning that label ``In
[<pool>]`` in every term, as the verification Jobs do). The pool comes from the namespace's own
:data:`components.tenancy.labels.POOL_LABEL` (``namespaceObject``), never from a parameter object: a
``paramRef`` without a namespace reads the pod's namespace, where the team may edit ConfigMaps.
Namespaces are written by the platform only (the team role has no verb on them): one source, no
parameter to keep elsewhere. The binding matches *every* team namespace, as the partition binding
does: a team namespace without the label (a team with no partition) may request no RDMA resource
on any pool, and GPUs only on a pool no team owns (:func:`components.model.elastic.unowned_pools`,
written into the policy as the list ``variables.unownedPools``: a pod pinned elsewhere would take
GPUs out of another team's partition pool). Bound only to labelled
namespaces, a partitionless team with ``quota.rdma`` (its quota then names ``rdma/hcashared``) could
select another team's ND pool — another team's InfiniBand partition — and nothing would look
(review 2026-12-01, item 1).

Every expression is valid CEL for admissionregistration.k8s.io/v1 on every supported minor (1.35 to
1.37; the e2e stores and type-checks them on 1.35.4 and 1.37.2): ``has()``
guards instead of optional types, and no list concatenation across element types (each container
list is checked on its own: ``Container`` and ``EphemeralContainer`` are different types to the
type checker).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pulumi

from components import k8s as kube
from components.k8s import Manifest
from components.model.config import StackConfig
from components.model.elastic import unowned_pools
from components.model.resources import SRIOV_PREFIX
from components.tenancy import policy
from components.tenancy.hami_admission import hami_admission_objects
from components.tenancy.labels import AKS_POOL_LABEL, PARTITION_LABEL, POOL_LABEL
from components.tenancy.network_admission import (
    networks_binding,
    networks_immutable_binding,
    networks_immutable_policy,
    networks_policy,
)
from components.tenancy.policy import CONTAINER_LISTS

POOL_POLICY: Final = "gpuaas-team-node-pool"
PARTITION_POLICY: Final = "gpuaas-team-partition"


# --------------------------------------------------------------------------------------------
# Resources per container list


def _every_resource(pred: str) -> str:
    """CEL: ``pred`` (over a resource name ``r``) holds for every request and limit of every container."""
    per_container = (
        "!has(c.resources) || ("
        f"(!has(c.resources.requests) || c.resources.requests.all(r, {pred})) && "
        f"(!has(c.resources.limits) || c.resources.limits.all(r, {pred})))"
    )
    return " && ".join(
        f"(!has(object.spec.{field}) || object.spec.{field}.all(c, {per_container}))" for field in CONTAINER_LISTS
    )


# --------------------------------------------------------------------------------------------
# Partitions (on-prem)


#: Every partition resource starts so (components/model/resources.py ``sriov_resource``); any other
#: resource under it is refused as well, the safe side.
PARTITION_RESOURCE_PREFIX: Final = f"{SRIOV_PREFIX}/sriov"
OWN_PARTITION_VAR: Final = (
    f"has(namespaceObject.metadata.labels) && '{PARTITION_LABEL}' in namespaceObject.metadata.labels"
    f" ? '{SRIOV_PREFIX}/' + namespaceObject.metadata.labels['{PARTITION_LABEL}'] : ''"
)
OWN_PARTITION_ONLY: Final = _every_resource(
    f"!r.startsWith('{PARTITION_RESOURCE_PREFIX}') || r == variables.ownPartition"
)


def partition_resource_violations(pod_spec: dict[str, Any], own: str | None) -> list[str]:
    """Python mirror of :data:`OWN_PARTITION_ONLY`: the foreign partition resources a pod asks for."""
    found: set[str] = set()
    for field in CONTAINER_LISTS:
        for c in pod_spec.get(field) or []:
            for kind in ("requests", "limits"):
                for r in (c.get("resources") or {}).get(kind) or {}:
                    if r.startswith(PARTITION_RESOURCE_PREFIX) and r != own:
                        found.add(r)
    return sorted(found)


def partition_policy() -> Manifest:
    """A pod may request only its own namespace's partition resource among ``nvidia.com/sriov*``."""
    return policy.policy(
        PARTITION_POLICY,
        rules=[policy.resource_rule("", "v1", ["CREATE"], ["pods"])],
        # The resource walk is a variable, as in the pool policy: the 1.34 type checker
        # (kube-controller-manager's validatingadmissionpolicy-status controller) reports
        # "undefined field 'requests'" for a container's resources in a validation although
        # the API server evaluates it correctly (checked on a v1.34.4 API server).
        variables=[
            {"name": "ownPartition", "expression": OWN_PARTITION_VAR},
            {"name": "ownPartitionOnly", "expression": OWN_PARTITION_ONLY},
        ],
        validations=[
            {
                "expression": "variables.ownPartitionOnly",
                "messageExpression": (
                    f"'pods in this namespace may request no {PARTITION_RESOURCE_PREFIX}* resource but ' + "
                    "(variables.ownPartition == '' ? 'none (the namespace has no InfiniBand partition)' : "
                    "variables.ownPartition + ' (the VF pool of its own partition)')"
                ),
                "reason": "Forbidden",
            }
        ],
    )


def partition_binding() -> Manifest:
    """Every namespace: a partition's VFs are for its team's namespace alone."""
    return policy.binding(PARTITION_POLICY)


# --------------------------------------------------------------------------------------------
# Node pool (AKS)


_ACCEL = "r.startsWith('nvidia.com/') || r.startsWith('rdma/')"
WANTS_ACCELERATOR: Final = "!(" + _every_resource(f"!({_ACCEL})") + ")"
WANTS_RDMA: Final = "!(" + _every_resource("!r.startsWith('rdma/')") + ")"
#: The team's pool: its namespace's label; ``''`` where the namespace has none (no partition).
POOL_VAR: Final = (
    f"has(namespaceObject.metadata.labels) && '{POOL_LABEL}' in namespaceObject.metadata.labels"
    f" ? namespaceObject.metadata.labels['{POOL_LABEL}'] : ''"
)
_KEY = f"'{AKS_POOL_LABEL}'"


def selects(allowed: str) -> str:
    """CEL: the pod pins ``kubernetes.azure.com/agentpool`` to pools ``v`` for which ``allowed`` holds —
    by nodeSelector, or by a required node affinity every term of which pins it ``In`` such pools."""
    pred = allowed.replace("{v}", f"object.spec.nodeSelector[{_KEY}]")
    each = allowed.replace("{v}", "v")
    return (
        f"(has(object.spec.nodeSelector) && {_KEY} in object.spec.nodeSelector && {pred}) || "
        "(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && "
        "has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && "
        "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms.size() > 0 && "
        "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.all(t, "
        f"has(t.matchExpressions) && t.matchExpressions.exists(e, e.key == {_KEY} && "
        "e.operator == 'In' && has(e.values) && e.values.size() > 0 && "
        f"e.values.all(v, {each}))))"
    )


#: nodeSelector ``key=pool``, or a required node affinity every term of which pins ``key In [pool]``.
SELECTS_POOL: Final = selects("{v} == variables.pool")
#: The same for a team without a partition: one of the pools no team owns (``variables.unownedPools``).
SELECTS_UNOWNED: Final = selects("{v} in variables.unownedPools")


def pools_var(pools: Sequence[str]) -> dict[str, str]:
    """The pools no team's partition owns, as data in the policy (a CEL list literal)."""
    return {"name": "unownedPools", "expression": "[" + ", ".join(f"'{p}'" for p in pools) + "]"}


def unowned_pools_var(cfg: StackConfig) -> dict[str, str]:
    """:func:`pools_var` of the stack's pools no team owns (:func:`components.model.elastic.unowned_pools`)."""
    return pools_var(unowned_pools(cfg))


def _unowned_text(pools: Sequence[str]) -> str:
    return ", ".join(pools) if pools else "none: each GPU pool is the partition of a team"


def pool_policy(unowned: Sequence[str]) -> Manifest:
    """AKS: GPU/RDMA pods of a team must select the team's ND pool (its IB partition); a team
    without one selects a pool no team owns (``unowned``: their names, in platform order), for GPUs only.

    CREATE only: a pod's node selector and affinity cannot be loosened later (only a pod with
    scheduling gates may add to them), and extended resources cannot be resized in place.
    """
    return policy.policy(
        POOL_POLICY,
        rules=[policy.resource_rule("", "v1", ["CREATE"], ["pods"])],
        variables=[
            {"name": "wantsAccelerator", "expression": WANTS_ACCELERATOR},
            {"name": "wantsRdma", "expression": WANTS_RDMA},
            {"name": "pool", "expression": POOL_VAR},
            pools_var(unowned),
        ],
        validations=[
            {
                # No pool label (no partition): no RDMA, on any pool — RDMA is what reaches a
                # pool's InfiniBand partition — and GPUs only on a pool no team owns: another
                # team's pool is its InfiniBand partition and its nominal GPUs (elastic queues give
                # partitionless teams exactly those flavors; Kueue writes their agentpool label).
                "expression": (
                    "variables.pool == '' ? !variables.wantsRdma && "
                    f"(!variables.wantsAccelerator || ({SELECTS_UNOWNED})) : "
                    f"(!variables.wantsAccelerator || ({SELECTS_POOL}))"
                ),
                "messageExpression": (
                    "variables.pool == '' ? (variables.wantsRdma ? 'pods in this namespace may request no RDMA "
                    "resource: the team has no InfiniBand pool (no partition)' : 'GPU pods of a team without a "
                    f"partition select a pool no team owns with nodeSelector {AKS_POOL_LABEL} "
                    f"({_unowned_text(unowned)})') : "
                    "'GPU/RDMA pods of this team run on its InfiniBand pool: select it with nodeSelector "
                    f"{AKS_POOL_LABEL}=' + variables.pool"
                ),
                "reason": "Forbidden",
            }
        ],
    )


def pool_binding() -> Manifest:
    """Every team namespace, labelled with a pool or not (a namespace without one may request no accelerator)."""
    return policy.binding(POOL_POLICY, policy.team_namespaces())


@dataclass(frozen=True, kw_only=True)
class AdmissionArgs:
    """Arguments of :class:`Admission`: which guards the platform needs besides the network guards, which
    every platform has. Ordering: ``opts.depends_on``, forwarded to every child."""

    partitions: bool = False
    """On-prem: guard the partition resources (``nvidia.com/sriov*``: a pod requests only its own
    namespace's); defaults to off (no on-prem partitions)."""
    node_pools: tuple[str, ...] | None = None
    """AKS: guard the ND pools, with the GPU pools no team's partition owns (platform order; a team without
    a partition runs its GPU pods there, and no RDMA pod); ``None`` (the default): no pool guard."""
    hami_core_policy: str | None = None
    """Where HAMi runs: guard HAMi pods, with the cluster's core policy (``hami.corePolicy``, the one value of
    ``GPU_CORE_UTILIZATION_POLICY`` a container may set); ``None`` (the default): no HAMi guard."""


def admission_objects(args: AdmissionArgs) -> dict[str, Manifest]:
    """Every admission object by role: the network guards, on-prem the partition guard, on AKS the pool guard,
    and where HAMi runs its pods' guard (:mod:`components.tenancy.hami_admission`)."""
    out = {
        "networks-policy": networks_policy(),
        "networks-binding": networks_binding(),
        "networks-immutable-policy": networks_immutable_policy(),
        "networks-immutable-binding": networks_immutable_binding(),
    }
    if args.partitions:
        out.update({"partition-policy": partition_policy(), "partition-binding": partition_binding()})
    if args.node_pools is not None:
        out.update({"pool-policy": pool_policy(args.node_pools), "pool-binding": pool_binding()})
    out.update(hami_admission_objects(args.hami_core_policy))
    return out


class Admission(pulumi.ComponentResource):
    """The team admission policies and their bindings (cluster-scoped, a constant count).

    ``objects``: every policy and binding, for what may only exist once they are in force (the
    team quotas and RoleBindings, :class:`components.tenancy.teams.TeamsArgs` ``guards``).
    """

    objects: list[pulumi.CustomResource]

    def __init__(self, name: str, args: AdmissionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Admission", name, None, opts)
        depends_on = kube.depends_on(opts)
        objects = admission_objects(args)
        policies: dict[str, pulumi.CustomResource] = {}
        for role, manifest in objects.items():
            if role.endswith("-policy"):
                policies[role] = kube.apply(f"{name}-{role}", manifest, kube.child(self, depends_on))
        self.objects = list(policies.values())
        for role, manifest in objects.items():
            if role.endswith("-binding"):
                guard = policies[role.replace("-binding", "-policy")]
                self.objects.append(kube.apply(f"{name}-{role}", manifest, kube.child(self, [guard, *depends_on])))
        self.register_outputs({"policies": sorted(m["metadata"]["name"] for m in objects.values())})
