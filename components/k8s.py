"""The thin shell between rendered manifests and pulumi-kubernetes resources, and the renderers every area shares.

Renderers return plain manifests (``apiVersion``/``kind``/``metadata``/…), tested without
Pulumi and validated against upstream schemas; :func:`apply` registers one as the matching typed
resource (or a CustomResource for CRD kinds). ``metadata.name`` is always explicit, so Pulumi
never adds an auto-suffix to a cluster object.

Shared renderers with no area of their own live here too: tolerations (:func:`taint_toleration`,
:func:`tolerations`) and the one skeleton of every node agent's DaemonSet (:func:`node_daemonset`).
Nothing here knows a team, a partition or an operator's objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.model import charts
from components.model.network import Network
from components.model.resources import PART_OF

Manifest = dict[str, Any]

_TYPED: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
    ("v1", "LimitRange"): k8s.core.v1.LimitRange,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Pod"): k8s.core.v1.Pod,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("batch/v1", "CronJob"): k8s.batch.v1.CronJob,
    ("scheduling.k8s.io/v1", "PriorityClass"): k8s.scheduling.v1.PriorityClass,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): (
        k8s.admissionregistration.v1.ValidatingAdmissionPolicy
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding
    ),
}


def apply(name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None) -> pulumi.CustomResource:
    """Register ``manifest`` as a resource with logical name ``name``.

    Typed classes take the manifest's top-level fields as arguments; any other kind becomes an
    ``apiextensions.CustomResource`` carrying every field (e.g. ``spec``) unchanged. A built-in
    kind must be in ``_TYPED``: the provider knows the core group only as ``core/v1``, and the real
    engine refuses ``kubernetes:v1:<Kind>`` ("apiVersion does not have both a group and a version").
    """
    api, kind = manifest["apiVersion"], manifest["kind"]
    if not manifest.get("metadata", {}).get("name"):
        raise ValueError(f"{kind} {name!r} has no metadata.name: cluster objects are always named explicitly")
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    cls = _TYPED.get((api, kind))
    if cls is None and "/" not in api:
        # The provider reads an untyped kind as a custom resource, group/version: a core kind
        # registered that way fails only at `pulumi up` ("apiVersion does not have both a group
        # and a version"), after everything before it was created.
        raise ValueError(f"{kind} {name!r}: core kind {api}/{kind} has no typed class in components/k8s.py _TYPED")
    if cls is None and set(fields) - {"metadata", "spec"}:
        return _CustomObject(name, manifest, opts)
    if cls is None:
        return k8s.apiextensions.CustomResource(name, api_version=api, kind=kind, opts=opts, **fields)
    generic = GENERIC.get((api, kind))
    if generic is not None:
        return _BuiltinObject(name, generic, manifest, opts)
    return cls(name, opts=opts, **{_snake(k): v for k, v in fields.items()})  # type: ignore[no-any-return]


#: The built-in kinds a fleet registers by the thousand (a ResourceQuota per team and pool kind, a
#: RoleBinding per team), registered as a generic ``CustomResource`` with the typed class's own type
#: token, properties, provider version and aliases: the typed classes' argument objects and type
#: translation were half the SDK's cost per resource (0.91 -> 0.46 ms per RoleBinding; issue 37).
#: Kind -> (type token, the typed class's aliases). tests/plan/test_generic_kinds.py proves every
#: registration equal to the typed class's (inputs, options, aliases, version) for both stacks.
GENERIC: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("v1", "ResourceQuota"): ("kubernetes:core/v1:ResourceQuota", ()),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): (
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
        (
            "kubernetes:rbac.authorization.k8s.io/v1alpha1:RoleBinding",
            "kubernetes:rbac.authorization.k8s.io/v1beta1:RoleBinding",
        ),
    ),
}


class _BuiltinObject(pulumi.CustomResource):
    """A built-in kind of :data:`GENERIC`, registered as its typed class would register it."""

    def __init__(
        self,
        name: str,
        generic: tuple[str, tuple[str, ...]],
        manifest: Mapping[str, Any],
        opts: pulumi.ResourceOptions | None,
    ) -> None:
        token, aliases = generic
        # As the typed class: the provider's defaults (its version) first, the caller's options, then its aliases.
        merged = pulumi.ResourceOptions.merge(k8s._utilities.get_resource_opts_defaults(), opts)
        if aliases:
            merged = pulumi.ResourceOptions.merge(
                merged, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=a) for a in aliases])
            )
        super().__init__(token, name, dict(manifest), merged)


class _CustomObject(pulumi.CustomResource):
    """A custom resource with top-level fields besides ``spec`` (a Kueue WorkloadPriorityClass has
    ``value``): Python's ``apiextensions.CustomResource`` takes only metadata and spec, while the
    provider takes any field (the Node.js SDK's CustomResource passes "otherFields" through)."""

    def __init__(self, name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions | None) -> None:
        version = pulumi.ResourceOptions(version=k8s._utilities.get_version())  # type: ignore[no-untyped-call]
        super().__init__(
            f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}",
            name,
            dict(manifest),
            pulumi.ResourceOptions.merge(opts, version),
        )


def helm_release(
    logical_name: str,
    source: charts.Source,
    *,
    release: str,
    namespace: str,
    values: Mapping[str, Any],
    timeout: int,
    opts: pulumi.ResourceOptions,
) -> k8s.helm.v3.Release:
    """An operator chart as a real Helm release (hooks run: the GPU Operator upgrades its CRDs in one).

    ``source`` is one of :func:`components.model.charts.stack_charts` at its pinned version, where
    the stack takes charts from (``gpuaas:charts``: the public repositories, or a mirror;
    :func:`components.model.charts.source`). The namespace is ours (with its Pod Security labels),
    never Helm's. Not atomic: a rollback would hide why an operator failed; ``cleanup_on_fail``
    removes what a failed install created so the next ``up`` starts clean (pulumi-kubernetes#2054).
    ``timeout`` is generous because driver containers compile kernel modules on first start; Helm's
    300 s is far too short.
    """
    return k8s.helm.v3.Release(
        logical_name,
        name=release,
        chart=source.chart,
        version=source.version,
        # No repository for an OCI reference (oci://...) or a local chart: Helm takes ``chart`` as it is.
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=source.repository)
        if source.repository is not None
        else None,
        namespace=namespace,
        create_namespace=False,
        values=dict(values),
        timeout=timeout,
        atomic=False,
        cleanup_on_fail=True,
        opts=opts,
    )


def _snake(key: str) -> str:
    """Top-level manifest keys as Python argument names (``binaryData`` → ``binary_data``)."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def taint_toleration(taint: str) -> dict[str, str]:
    """``key[=value]:Effect`` (AKS ``nodeTaints``) as the toleration that admits it."""
    kv, _, effect = taint.partition(":")
    key, eq, value = kv.partition("=")
    tol = {"key": key, "operator": "Equal" if eq else "Exists"}
    if eq:
        tol["value"] = value
    if effect:
        tol["effect"] = effect
    return tol


def child(parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
    """Options of a component's child: parented (so providers flow down) and optionally ordered."""
    return pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on or []))


def depends_on(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """The resources a component's own ``opts.depends_on`` names, for it to put on its children.

    The SDK registers a component's children with their own dependencies only: a component's
    ``depends_on`` orders nothing it creates (in the pinned SDK, a ``ResourceOptions.depends_on``
    reaches the registration of the resource it is given to alone). Every gpuaas
    component forwards what this returns, so a user orders one with ordinary ``ResourceOptions``.
    A resource, a list of resources or nothing; an ``Output`` of resources is refused by name (its
    members are known only once it resolves, too late to order the children's registration).
    """
    given = None if opts is None else opts.depends_on
    if given is None:
        return []
    if isinstance(given, pulumi.Resource):
        return [given]
    if isinstance(given, Sequence) and all(isinstance(r, pulumi.Resource) for r in given):
        return [r for r in given if isinstance(r, pulumi.Resource)]
    raise TypeError("gpuaas components take depends_on as a resource or a list of resources, not an Output")


# --------------------------------------------------------------------------------------------
# Node agents: the DaemonSets that run on every RDMA node


def tolerations(network: Network) -> list[dict[str, Any]]:
    """``cfg.network.tolerations`` as Kubernetes tolerations (unset fields left out)."""
    return [t.model_dump(exclude_none=True) for t in network.tolerations]


#: The Network Operator sets this node label to ``false`` once the DOCA driver pod of the node is
#: ready (and on every Mellanox node when no ``ofedDriver`` is configured), ``true`` while it
#: (re)loads; its own operands select ``"false"`` (network-operator
#: ``manifests/state-sriov-device-plugin/0030-sriov-dp-daemonset.yaml``,
#: ``controllers/nicclusterpolicy_controller.go`` ``handleMOFEDWaitLabels``).
MOFED_WAIT_LABEL = "network.nvidia.com/operator.mofed.wait"


def driver_ready_node_selector(network: Network) -> dict[str, str]:
    """The RDMA nodes' selector, plus "driver loaded" where the DOCA driver runs in a container.

    A node DaemonSet that loads modules or creates VFs before the driver container has replaced
    the inbox modules races it (Mellanox/doca-driver-build#52); selecting the operator's own
    wait label makes the pod start after the driver and leave while the driver reloads.
    """
    selector = dict(network.node_selector)
    if network.ofed_driver == "container":
        selector[MOFED_WAIT_LABEL] = "false"
    return selector


def node_daemonset(
    network: Network,
    name: str,
    pod: Mapping[str, Any],
    *,
    node_selector: Mapping[str, str],
    max_unavailable: int | str | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str | None = None,
) -> Manifest:
    """The DaemonSet of one node agent: in the Network Operator namespace (or ``namespace``, where
    the agent runs as another operator's ServiceAccount), on the RDMA nodes.

    Every node DaemonSet has this shape: the ``app.kubernetes.io/name`` and part-of labels on the
    object and its pods, the selector on the name, a rolling update (``max_unavailable`` where the
    agent must roll slower or faster than the default), the pod template's ``annotations`` (the
    hashes that re-roll it), and ``pod`` with ``node_selector`` and :func:`tolerations` added.
    """
    labels = {"app.kubernetes.io/name": name, **PART_OF}
    strategy: dict[str, Any] = {"type": "RollingUpdate"}
    if max_unavailable is not None:
        strategy["rollingUpdate"] = {"maxUnavailable": max_unavailable}
    template: dict[str, Any] = {"labels": labels}
    if annotations:
        template["annotations"] = dict(annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace or network.namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "updateStrategy": strategy,
            "template": {
                "metadata": template,
                "spec": {"nodeSelector": dict(node_selector), "tolerations": tolerations(network), **pod},
            },
        },
    }
