"""Tenancy under the DRA resource model: what a team may claim, and the guard that holds it there.

Per team namespace (``gpuaas:teams[*]``, only with ``gpuOperator.resourceModel: dra``):

* **ResourceClaimTemplates** ``gpuaas-gpu`` and ``gpuaas-mig-<profile>``, one device each, for the
  shapes it may claim (:func:`components.dra.claims.claim_templates`): its quota's, and with
  elastic quotas the ones it may borrow (:func:`components.model.dra.claimable`).
* **RoleBinding** of the team's groups to the ``gpuaas-team-dra`` ClusterRole: create claims and
  templates (the built-in ``edit`` grants none of ``resource.k8s.io``; a separate role keeps the
  device-plugin model's ``gpuaas-team-member`` unchanged).
* The quota itself is the team's ResourceQuota (:func:`components.model.dra.render_quota`) and the
  classes it may claim are labels on its namespace (:func:`components.model.dra.namespace_labels`).

Cluster-wide: gpuaas's per-profile MIG **DeviceClasses**, and the **ValidatingAdmissionPolicy**
``gpuaas-team-claims`` on ResourceClaims and ResourceClaimTemplates in team namespaces:

1. every request (``exactly``) and every ``firstAvailable`` subrequest names a class the
   namespace's ``dra.gpuaas.io/<class>`` labels allow — not ``vfio.gpu.nvidia.com`` (raw
   passthrough), not the catch-all ``mig.nvidia.com``, not another team's MIG profile;
2. no ``adminAccess`` (it grants access to devices already allocated to others, KEP-5018);
3. no ``allocationMode: All`` (every matching device on a node, not a shape any quota offers).

Selectors are left free: a device must satisfy the class's selectors *and* the request's
(Kubernetes DRA docs, "DeviceClass"), so a tenant's CEL can only narrow its own class. The
classes come from namespace labels, which tenants cannot edit, rather than a ConfigMap parameter
in their namespace, which the team role may write. The ResourceQuota stays the backstop: a class
not labelled has a ``"0"`` device quota too.

On AKS the ``gpuaas-team-dra-node-pool`` policy asks of a pod with ``resourceClaims`` what
:mod:`components.tenancy.admission`'s pool policy asks of a pod with GPU extended resources: select the
team's ND pool (its InfiniBand partition), named by the namespace's ``gpuaas.io/node-pool`` label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import pulumi

from components import k8s as kube
from components.dra import claims
from components.k8s import Manifest
from components.model import dra
from components.tenancy import admission, policy
from components.tenancy.labels import AKS_POOL_LABEL, PART_OF


@dataclass(frozen=True)
class DraTeam:
    """One team's part of the DRA model: what it may claim and who may create claims."""

    name: str
    """The team's name (its objects' logical names, :meth:`DraTenancy.add_team_objects`' namespaces key)."""
    namespace: str
    """The team namespace, where its claim templates and claims RoleBinding live."""
    classes: tuple[str, ...] = ()
    """The device classes it may claim, a ResourceClaimTemplate each (:func:`components.model.dra.claimable`)."""
    groups: tuple[str, ...] = ()
    """The groups bound to :data:`ROLE` in its namespace (none: no RoleBinding)."""


@dataclass(frozen=True, kw_only=True)
class DraTenancyArgs:
    """Arguments of :class:`DraTenancy`. Ordering: ``opts.depends_on``, forwarded to every child."""

    mig_profiles: tuple[str, ...] = ()
    """The MIG profiles offered (static layouts, or dynamic MIG's per GPU model): a DeviceClass each."""
    node_pools: bool = False
    """AKS: claim pods must select their team's ND pool (the ``gpuaas-team-dra-node-pool`` guard);
    off on-prem, where a team's partition is its VF pool, not a node pool."""
    unowned_pools: tuple[str, ...] = ()
    """With ``node_pools``: the ND pools no team's partition owns, where teams without one run."""
    teams: tuple[DraTeam, ...] = ()
    """The teams, in team order."""


CLAIMS_POLICY: Final = "gpuaas-team-claims"
POOL_POLICY: Final = "gpuaas-team-dra-node-pool"
ROLE: Final = "gpuaas-team-dra"

#: The device requests of a ResourceClaim (``spec.devices``) or a template (``spec.spec.devices``).
REQUESTS_VAR: Final = (
    "request.resource.resource == 'resourceclaimtemplates' ? "
    "(has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.requests) ? "
    "object.spec.spec.devices.requests : []) : "
    "(has(object.spec.devices) && has(object.spec.devices.requests) ? object.spec.devices.requests : [])"
)
LABELS_VAR: Final = "has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}"


def _allowed(device_class: str) -> str:
    key = f"'{dra.CLASS_LABEL_PREFIX}' + {device_class}"
    return f"({key} in variables.labels && variables.labels[{key}] == 'true')"


#: (name, CEL expression that must be true, message) — the claims policy's validations.
CLAIM_CHECKS: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "device-class",
        "variables.requests.all(r, "
        f"(!has(r.exactly) || {_allowed('r.exactly.deviceClassName')}) && "
        f"(!has(r.firstAvailable) || r.firstAvailable.all(s, {_allowed('s.deviceClassName')})))",
        "a team may claim only the device classes its quota covers (namespace labels "
        f"{dra.CLASS_LABEL_PREFIX}<class>): gpu.nvidia.com for quota.gpus, mig-<profile>.{dra.CLASS_DOMAIN} for "
        "quota.mig; use the gpuaas-* ResourceClaimTemplates",
    ),
    (
        "no-admin-access",
        "variables.requests.all(r, !has(r.exactly) || !has(r.exactly.adminAccess) || !r.exactly.adminAccess)",
        "adminAccess is not allowed in team namespaces: it reaches devices allocated to other claims",
    ),
    (
        "no-allocation-mode-all",
        "variables.requests.all(r, "
        "(!has(r.exactly) || !has(r.exactly.allocationMode) || r.exactly.allocationMode != 'All') && "
        "(!has(r.firstAvailable) || r.firstAvailable.all(s, !has(s.allocationMode) || s.allocationMode != 'All')))",
        "allocationMode All is not allowed in team namespaces: request an exact count",
    ),
)


def claims_policy() -> Manifest:
    """The guard on team claims and templates; ``matchPolicy: Equivalent`` also sends
    ``v1beta1``/``v1beta2`` requests here, converted to ``v1`` (the shape the CEL reads)."""
    return policy.policy(
        CLAIMS_POLICY,
        match_policy="Equivalent",
        namespaces=policy.team_namespaces(),
        rules=[
            policy.resource_rule(
                "resource.k8s.io", "v1", ["CREATE", "UPDATE"], ["resourceclaims", "resourceclaimtemplates"]
            )
        ],
        variables=[
            {"name": "requests", "expression": REQUESTS_VAR},
            {"name": "labels", "expression": LABELS_VAR},
        ],
        validations=policy.validations(CLAIM_CHECKS),
    )


def claims_binding() -> Manifest:
    return policy.binding(CLAIMS_POLICY, policy.team_namespaces())


#: The pool guard's own selector tests (the pool comes from the namespace label, ``variables.pool``).
SELECTS_POOL: Final = admission.SELECTS_POOL
SELECTS_UNOWNED: Final = admission.SELECTS_UNOWNED


def pool_policy(unowned: Sequence[str]) -> Manifest:
    """AKS: pods of a team that claim DRA devices must select the team's ND pool; a team without a
    partition, one of the pools no team owns (as :func:`components.tenancy.admission.pool_policy`)."""
    return policy.policy(
        POOL_POLICY,
        rules=[policy.resource_rule("", "v1", ["CREATE"], ["pods"])],
        variables=[
            {
                "name": "claims",
                "expression": "has(object.spec.resourceClaims) && object.spec.resourceClaims.size() > 0",
            },
            {"name": "pool", "expression": admission.POOL_VAR},
            # The pools no team's partition owns, as data in the policy (a CEL list literal, as the
            # pod pool guard's components/tenancy/admission.py ``unowned_pools_var``).
            {"name": "unownedPools", "expression": "[" + ", ".join(f"'{p}'" for p in unowned) + "]"},
        ],
        validations=[
            {
                "expression": (f"!variables.claims || (variables.pool == '' ? ({SELECTS_UNOWNED}) : ({SELECTS_POOL}))"),
                "messageExpression": (
                    "variables.pool == '' ? 'pods of a team without a partition that claim GPUs select a pool no "
                    f"team owns with nodeSelector {AKS_POOL_LABEL} ({', '.join(unowned) or 'none'})' : "
                    "'pods of this team that claim GPUs run on its InfiniBand pool: select it with nodeSelector "
                    f"{AKS_POOL_LABEL}=' + variables.pool"
                ),
                "reason": "Forbidden",
            }
        ],
    )


def pool_binding() -> Manifest:
    """Every team namespace: with a pool label its pool, without one the pools no team owns."""
    return policy.binding(POOL_POLICY, policy.team_namespaces())


def cluster_role() -> Manifest:
    """Claims and templates in the team's namespace (bound per namespace, like ``gpuaas-team-member``)."""
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": ROLE, "labels": dict(PART_OF)},
        "rules": [
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims", "resourceclaimtemplates"],
                "verbs": verbs,
            }
        ],
    }


def role_binding(team: DraTeam) -> Manifest | None:
    """The team's groups bound to :data:`ROLE` in its namespace; ``None`` without groups."""
    if not team.groups:
        return None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ROLE, "namespace": team.namespace, "labels": dict(PART_OF)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in sorted(team.groups)
        ],
    }


def cluster_objects(args: DraTenancyArgs) -> dict[str, Manifest]:
    """Cluster-scoped DRA objects by role: MIG classes, the role, the policies and bindings."""
    out: dict[str, Manifest] = {f"class-{p.replace('+', '.')}": claims.mig_device_class(p) for p in args.mig_profiles}
    out.update({"role": cluster_role(), "claims-policy": claims_policy(), "claims-binding": claims_binding()})
    if args.node_pools:
        out.update({"pool-policy": pool_policy(args.unowned_pools), "pool-binding": pool_binding()})
    return out


def team_objects(team: DraTeam) -> dict[str, Manifest]:
    """One team's DRA objects by role (the suffix of its logical name)."""
    out: dict[str, Manifest] = {
        f"template-{name}": t for name, t in claims.templates(team.namespace, team.classes).items()
    }
    binding = role_binding(team)
    if binding is not None:
        out["rolebinding"] = binding
    return out


class DraTenancy(pulumi.ComponentResource):
    """The DRA model's classes, claim templates, RBAC and claim guard (``resourceModel: dra`` only).

    Two steps around the team namespaces: the constructor registers the cluster-scoped classes,
    role and guards (``guards``: the policies and bindings), which the team quotas — whose device
    entries let a team claim GPUs — and RoleBindings wait for, so no claim is ever admitted
    unguarded; :meth:`add_team_objects` then adds each team's templates and its claims RoleBinding,
    which waits for the guards as well.
    """

    guards: list[pulumi.CustomResource]

    def __init__(self, name: str, args: DraTenancyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:DraTenancy", name, None, opts)
        self._name, self._args = name, args
        after = self._after = kube.depends_on(opts)
        self._created: dict[str, pulumi.CustomResource] = {}
        objects = cluster_objects(args)
        for role, manifest in objects.items():
            if not role.endswith("-binding"):
                self._created[role] = kube.apply(f"{name}-{role}", manifest, kube.child(self, after))
        self.guards = [r for role, r in self._created.items() if role.endswith("-policy")]
        for role, manifest in objects.items():
            if role.endswith("-binding"):
                guard = self._created[role.replace("-binding", "-policy")]
                self.guards.append(kube.apply(f"{name}-{role}", manifest, kube.child(self, [guard, *after])))

    def add_team_objects(self, namespaces: Mapping[str, pulumi.Resource]) -> None:
        """Each team's claim templates and claims RoleBinding (after its namespace, ``namespaces[team]``;
        the binding after the guards)."""
        for team in self._args.teams:
            ns = namespaces[team.name]
            for role, manifest in team_objects(team).items():
                deps = [ns, self._created["role"], *self.guards] if role == "rolebinding" else [ns]
                kube.apply(f"{self._name}-{team.name}-{role}", manifest, kube.child(self, [*deps, *self._after]))
        policies = [CLAIMS_POLICY] + ([POOL_POLICY] if self._args.node_pools else [])
        self.register_outputs({"policies": policies})
