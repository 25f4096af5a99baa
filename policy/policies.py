"""gpuaas policy pack: the tenancy guarantees, checked on what a preview or update would deploy.

The components build these guarantees in (``components/tenancy/teams.py``, ``components/tenancy/quotas.py``,
``components/platform.py``); this pack checks the result, so a change that breaks one fails
``pulumi preview --policy-pack policy`` instead of reaching a cluster:

* every team namespace (label ``gpuaas.io/team``) has a ResourceQuota and a LimitRange;
* no workload in a team namespace requests another team's partition resource (the device-plugin
  pool a NAD in the other team's namespace names) or attaches to a NAD of another namespace;
* privileged pods (``securityContext.privileged``, ``hostNetwork``/``hostPID``/``hostIPC``) run only
  in the operator namespaces the stack creates, i.e. its namespaces without the team label;
* a stack whose teams have partition resources deploys the partition admission guard
  (``gpuaas-team-partition`` and its Deny binding): quotas name only a team's own partition, so
  that policy is what refuses another team's VF pool (components/tenancy/quotas.py);
* every Helm release pins an exact chart version;
* no NetworkAttachmentDefinition in ``default`` (Multus lets every namespace use NADs there unless
  ``globalNamespaces`` says otherwise: k8snetworkplumbingwg/multus-cni docs/configuration.md).

Props arrive as the engine sends them: camelCase wire names, wrapped by pulumi-policy's
unknown-checking proxy (``Mapping``/``Sequence``, never ``dict``/``list``), so every access goes
through ``Mapping``/``Sequence`` checks and a value unknown at preview raises the SDK's
``UnknownValueError``, which the SDK reports as "can't run during preview".

The pack runs in its own virtualenv with pulumi-policy alone (``PulumiPolicy.yaml``), so it
imports nothing from ``components``; tests/test_policy.py ties its constants to theirs.
``__main__.py`` only builds the PolicyPack: its constructor starts a gRPC server and never returns.
One module (≈ 450 lines) because the pack's virtualenv runs it as a file tree of its own: the six
checks and the prop readers they share stay together, each check beside the rule it enforces.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

#: Label on every team namespace (components/tenancy/teams.py TEAM_LABEL).
TEAM_LABEL: Final = "gpuaas.io/team"
#: NAD annotation naming the device-plugin pool its VFs come from (k8snetworkplumbingwg
#: network-attachment-definition spec v1.3, "resourceName").
RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"
#: Pod annotation selecting secondary networks (same spec, "network-selection annotation").
NETWORKS_ANNOTATION: Final = "k8s.v1.cni.cncf.io/networks"
#: Extended resources of IB partitions' VF pools, ``nvidia.com/sriov8001`` (components/model/resources.py).
SRIOV_PREFIX: Final = "nvidia.com/sriov"
NAD_TYPE: Final = "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
VAP_TYPE: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING_TYPE: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
#: The admission policy that keeps a pod to its own namespace's partition resource
#: (components/tenancy/admission.py PARTITION_POLICY).
PARTITION_POLICY: Final = "gpuaas-team-partition"
HELM_TYPES: Final = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
#: An exact chart version as Helm resolves it: no range, wildcard, partial version or ``latest``
#: (Helm treats ``version`` as a semver constraint: ``1.2`` or ``^1.2.0`` float). Same shape as
#: components/model/types.py SEMVER_TAG.
EXACT_VERSION: Final = re.compile(r"v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?")
#: A Kubernetes object name (DNS-1123 subdomain), as NAD and namespace names must be.
K8S_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
#: The namespace the Kubernetes provider uses for namespaced objects that name none.
DEFAULT_NAMESPACE: Final = "default"

#: Where each workload kind keeps its pod template; ``()`` is the Pod itself.
POD_TEMPLATE_PATHS: Final[Mapping[str, tuple[str, ...]]] = {
    "Pod": (),
    "Deployment": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
_CONTAINER_LISTS: Final = ("initContainers", "containers", "ephemeralContainers")
_HOST_NAMESPACES: Final = ("hostNetwork", "hostPID", "hostIPC")


# --- reading props -------------------------------------------------------------------------------


def _get(value: Any, *path: str) -> Any:
    """``value[path[0]][path[1]]…``, or None where a level is missing or not a mapping."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _items(value: Any) -> Sequence[Any]:
    """A list-valued prop as a sequence (empty when absent or not a list)."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return ()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def k8s_kind(resource_type: str) -> str | None:
    """``kubernetes:apps/v1:Deployment`` → ``Deployment``; None for non-Kubernetes types."""
    if not resource_type.startswith("kubernetes:"):
        return None
    return resource_type.rsplit(":", 1)[1]


def _name(props: Mapping[str, Any]) -> str | None:
    name = _get(props, "metadata", "name")
    return name if isinstance(name, str) else None


def _namespace(props: Mapping[str, Any]) -> str:
    ns = _get(props, "metadata", "namespace")
    return ns if isinstance(ns, str) and ns else DEFAULT_NAMESPACE


@dataclass(frozen=True)
class Workload:
    """A pod template in the stack: a Pod, or the template of a controller or Job."""

    urn: str
    kind: str
    name: str
    namespace: str
    annotations: Mapping[str, Any]
    pod_spec: Mapping[str, Any]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def workloads(resources: Iterable[PolicyResource]) -> Iterator[Workload]:
    """Every pod template among ``resources`` (Patch variants too: they change a live template)."""
    for r in resources:
        kind = k8s_kind(r.resource_type)
        if kind is None:
            continue
        kind = kind.removesuffix("Patch")
        if kind not in POD_TEMPLATE_PATHS:
            continue
        template = _get(r.props, *POD_TEMPLATE_PATHS[kind]) if POD_TEMPLATE_PATHS[kind] else r.props
        yield Workload(
            urn=r.urn,
            kind=kind,
            name=_name(r.props) or r.name,
            namespace=_namespace(r.props),
            annotations=_mapping(_get(template, "metadata", "annotations")),
            pod_spec=_mapping(_get(template, "spec")),
        )


def containers(pod_spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in _CONTAINER_LISTS:
        for c in _items(pod_spec.get(key)):
            if isinstance(c, Mapping):
                yield c


def requested_resources(pod_spec: Mapping[str, Any]) -> set[str]:
    """Resource names any container (or the pod) requests or limits; extended resources may be
    given as limits alone (kubernetes.io, "Extended resources": requests default to limits)."""
    names: set[str] = set()
    for holder in [*containers(pod_spec), pod_spec]:
        for field in ("requests", "limits"):
            names.update(str(k) for k in _mapping(_get(holder, "resources", field)))
    return names


def privileged_settings(pod_spec: Mapping[str, Any]) -> list[str]:
    """What makes the pod privileged, as ``field: true`` strings; empty when nothing does."""
    found = [f"{flag}: true" for flag in _HOST_NAMESPACES if pod_spec.get(flag) is True]
    for c in containers(pod_spec):
        if _get(c, "securityContext", "privileged") is True:
            found.append(f"container {c.get('name')!r} securityContext.privileged: true")
    return found


def network_refs(annotation: str, pod_namespace: str) -> list[tuple[str, str]]:
    """``(namespace, name)`` of every NAD a network-selection annotation names.

    Both forms of the spec: a JSON list of ``{"name", "namespace"?, "interface"?}`` objects, or
    comma-separated ``[namespace/]name[@interface]``. A missing namespace is the pod's own.
    Raises ValueError on a malformed annotation (Multus rejects the pod then, too).
    """
    text = annotation.strip()
    if not text:
        return []
    refs: list[tuple[str, str]] = []
    if text.startswith("["):
        items = json.loads(text)
        for item in items:
            if not isinstance(item, dict):
                raise ValueError(f"network selection element is not an object: {item!r}")
            refs.append((item.get("namespace") or pod_namespace, item.get("name")))
    else:
        for element in text.split(","):
            ns, _, name = element.strip().split("@", 1)[0].rpartition("/")
            refs.append((ns or pod_namespace, name))
    for ns, name in refs:
        for value in (ns, name):
            if not isinstance(value, str) or not K8S_NAME.fullmatch(value):
                raise ValueError(f"{value!r} is not a namespace or NAD name")
    return refs


@dataclass(frozen=True)
class Tenancy:
    """The namespaces of a stack, which team owns each, and which partition resources."""

    #: Team namespace → team (label value).
    team_of: Mapping[str, str]
    #: Namespace → URN of the resource that declares it (team and operator namespaces alike).
    namespace_urns: Mapping[str, str]
    #: Extended resource → teams whose namespaces hold a NAD naming it.
    owners: Mapping[str, frozenset[str]]

    @property
    def operator_namespaces(self) -> set[str]:
        return set(self.namespace_urns) - set(self.team_of)


def tenancy(resources: Sequence[PolicyResource]) -> Tenancy:
    team_of: dict[str, str] = {}
    namespace_urns: dict[str, str] = {}
    for r in resources:
        if k8s_kind(r.resource_type) not in ("Namespace", "NamespacePatch"):
            continue
        name = _name(r.props)
        if name is None:
            continue
        namespace_urns[name] = r.urn
        team = _get(r.props, "metadata", "labels", TEAM_LABEL)
        if isinstance(team, str) and team:
            team_of[name] = team
    owners: dict[str, set[str]] = defaultdict(set)
    for r in resources:
        if r.resource_type != NAD_TYPE:
            continue
        ns = _namespace(r.props)
        resource = _get(r.props, "metadata", "annotations", RESOURCE_NAME_ANNOTATION)
        if ns in team_of and isinstance(resource, str) and resource:
            owners[resource].add(team_of[ns])
    return Tenancy(team_of, namespace_urns, {k: frozenset(v) for k, v in owners.items()})


# --- stack policies ------------------------------------------------------------------------------


def validate_team_namespace_guards(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Every team namespace has a ResourceQuota and a LimitRange in it."""
    ten = tenancy(args.resources)
    present: dict[str, set[str]] = defaultdict(set)
    for r in args.resources:
        kind = k8s_kind(r.resource_type)
        if kind in ("ResourceQuota", "LimitRange"):
            present[kind].add(_namespace(r.props))
    for ns, team in sorted(ten.team_of.items()):
        for kind in ("ResourceQuota", "LimitRange"):
            if ns not in present[kind]:
                report_violation(
                    f"team namespace {ns!r} (team {team!r}) has no {kind}: without one a team's pods are "
                    f"unbounded; add a {kind} with metadata.namespace: {ns}",
                    ten.namespace_urns[ns],
                )


def validate_team_partitions(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Team workloads request only their own team's partition resources, and no partition
    resource belongs to two teams."""
    ten = tenancy(args.resources)
    for resource, teams in sorted(ten.owners.items()):
        if resource.startswith(SRIOV_PREFIX) and len(teams) > 1:
            report_violation(
                f"partition resource {resource} is named by the NADs of teams {sorted(teams)}: each IB "
                "partition's VF pool belongs to exactly one team",
                None,
            )
    for w in workloads(args.resources):
        team = ten.team_of.get(w.namespace)
        if team is None:
            continue
        for resource in sorted(requested_resources(w.pod_spec)):
            teams = ten.owners.get(resource, frozenset())
            if teams and team not in teams:
                report_violation(
                    f"{w.label} of team {team!r} requests {resource}, the partition resource of team(s) "
                    f"{sorted(teams)}; a team's pods request only their own partition's VFs",
                    w.urn,
                )


def validate_partition_guard(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Partition resources in team namespaces come with the admission policy that guards them."""
    ten = tenancy(args.resources)
    partitions = sorted(r for r in ten.owners if r.startswith(SRIOV_PREFIX))
    if not partitions:
        return
    policies = {_name(r.props) for r in args.resources if r.resource_type == VAP_TYPE}
    bound = {
        _get(r.props, "spec", "policyName")
        for r in args.resources
        if r.resource_type == VAP_BINDING_TYPE and "Deny" in _items(_get(r.props, "spec", "validationActions"))
    }
    missing = [
        what
        for what, ok in (("policy", PARTITION_POLICY in policies), ("Deny binding", PARTITION_POLICY in bound))
        if not ok
    ]
    if missing:
        report_violation(
            f"teams have partition resources ({', '.join(partitions)}) but the stack has no "
            f"ValidatingAdmissionPolicy {PARTITION_POLICY!r} {' and no '.join(missing)}: team quotas name only "
            "their own partition, so without it any namespace could request another team's VFs",
            None,
        )


def validate_team_networks(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Team workloads attach only to NADs in their own namespace."""
    ten = tenancy(args.resources)
    for w in workloads(args.resources):
        team = ten.team_of.get(w.namespace)
        annotation = w.annotations.get(NETWORKS_ANNOTATION)
        if team is None or annotation is None:
            continue
        if not isinstance(annotation, str):
            report_violation(f"{w.label}: annotation {NETWORKS_ANNOTATION} is not a string", w.urn)
            continue
        try:
            refs = network_refs(annotation, w.namespace)
        except ValueError as err:
            report_violation(f"{w.label}: annotation {NETWORKS_ANNOTATION} cannot be parsed ({err})", w.urn)
            continue
        for ns, name in refs:
            if ns != w.namespace:
                report_violation(
                    f"{w.label} of team {team!r} attaches to NetworkAttachmentDefinition {ns}/{name}; a team's "
                    f"pods use only the NADs of their own namespace {w.namespace!r}",
                    w.urn,
                )


def validate_privileged_placement(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Privileged pods only in the operator namespaces the stack creates (no team label)."""
    ten = tenancy(args.resources)
    allowed = ten.operator_namespaces
    for w in workloads(args.resources):
        settings = privileged_settings(w.pod_spec)
        if not settings or w.namespace in allowed:
            continue
        if w.namespace in ten.team_of:
            where = f"team namespace {w.namespace!r}"
        else:
            where = f"namespace {w.namespace!r}, which this stack does not create as an operator namespace"
        report_violation(
            f"{w.label} is privileged ({', '.join(settings)}) in {where}; privileged pods run only in "
            f"operator namespaces ({', '.join(sorted(allowed)) or 'none in this stack'})",
            w.urn,
        )


# --- resource policies ---------------------------------------------------------------------------


def validate_helm_version(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A Helm release's ``version`` is an exact chart version."""
    if args.resource_type not in HELM_TYPES:
        return
    version = args.props.get("version")
    chart = args.props.get("chart") or args.name
    if not isinstance(version, str) or not EXACT_VERSION.fullmatch(version):
        report_violation(
            f"Helm chart {chart!r} has version {version!r}: pin an exact chart version like v26.4.1 "
            "(empty, ranges, wildcards and partial versions let the chart change under the same config)",
            None,
        )


def validate_nad_namespace(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """No NetworkAttachmentDefinition in ``default``."""
    if args.resource_type != NAD_TYPE:
        return
    ns = _get(args.props, "metadata", "namespace")
    if not isinstance(ns, str) or not ns or ns == DEFAULT_NAMESPACE:
        shown = "no metadata.namespace (the provider's default)" if not ns else "namespace 'default'"
        report_violation(
            f"NetworkAttachmentDefinition {_name(args.props) or args.name!r} has {shown}: Multus lets pods of "
            "every namespace use NADs in 'default'; put it in the namespace of the team that owns it",
            None,
        )


team_namespace_guards = StackValidationPolicy(
    name="team-namespace-quota-and-limits",
    description="Every team namespace (label gpuaas.io/team) has a ResourceQuota and a LimitRange.",
    validate=validate_team_namespace_guards,
)
team_partitions = StackValidationPolicy(
    name="team-workloads-own-partition",
    description="Team workloads request no other team's partition resource (nvidia.com/sriovXXXX of its NAD).",
    validate=validate_team_partitions,
)
partition_guard = StackValidationPolicy(
    name="team-partitions-guarded-by-admission",
    description="Stacks with team partition resources deploy the gpuaas-team-partition admission policy.",
    validate=validate_partition_guard,
)
team_networks = StackValidationPolicy(
    name="team-workloads-own-networks",
    description="Team workloads attach only to NetworkAttachmentDefinitions of their own namespace.",
    validate=validate_team_networks,
)
privileged_placement = StackValidationPolicy(
    name="privileged-pods-in-operator-namespaces",
    description="Privileged pods (privileged, hostNetwork, hostPID, hostIPC) only in operator namespaces.",
    validate=validate_privileged_placement,
)
helm_version = ResourceValidationPolicy(
    name="helm-release-pinned-version",
    description="Every Helm release pins an exact chart version.",
    validate=validate_helm_version,
)
nad_namespace = ResourceValidationPolicy(
    name="no-network-attachment-in-default",
    description="No NetworkAttachmentDefinition in the default namespace.",
    validate=validate_nad_namespace,
)

#: Every policy of the pack, in the order the pack reports them.
POLICIES: Final[list[Policy]] = [
    team_namespace_guards,
    team_partitions,
    partition_guard,
    team_networks,
    privileged_placement,
    helm_version,
    nad_namespace,
]
#: The pack blocks a deployment on any violation.
ENFORCEMENT: Final = EnforcementLevel.MANDATORY
