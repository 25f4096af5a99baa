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

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import pulumi
import pulumi_kubernetes as k8s

from components.model import charts
from components.model.network import Network
from components.model.resources import PART_OF

Manifest = dict[str, Any]


class Builtin(NamedTuple):
    """How a built-in kind's typed pulumi-kubernetes class registers it, said once."""

    #: The typed class: module under ``pulumi_kubernetes`` and class name (imported only where used).
    typed: tuple[str, str]
    #: The type token the typed class registers (``kubernetes:core/v1:Namespace``).
    token: str
    #: The typed class's aliases (the kind's older API versions): what keeps a state's URNs.
    aliases: tuple[str, ...] = ()
    #: The fields the typed class makes secret (its inputs wrapped, ``additional_secret_outputs``).
    secrets: tuple[str, ...] = ()


def _builtin(
    group: str, kind: str, older: Sequence[str] = (), secrets: tuple[str, ...] = ()
) -> tuple[tuple[str, str], Builtin]:
    """``kind`` of ``group`` at v1 (``""``: core), its typed class and its aliases: the same kind at
    each of ``older`` (``"v1beta1"``, or ``"extensions/v1beta1"`` where the group differs)."""
    api = f"{group}/v1" if group else "v1"
    module = f"{group.split('.')[0] if group else 'core'}.v1"
    aliases = tuple(f"kubernetes:{o if '/' in o else f'{group}/{o}'}:{kind}" for o in older)
    return (api, kind), Builtin((module, kind), f"kubernetes:{group or 'core'}/v1:{kind}", aliases, secrets)


_RBAC, _ADMISSION = "rbac.authorization.k8s.io", "admissionregistration.k8s.io"
_OLDER = ("v1alpha1", "v1beta1")

#: Every built-in kind the renderers produce, by (apiVersion, kind); a server-side-apply patch of a
#: kind is ``<Kind>Patch``. Each is registered as a generic ``CustomResource`` with its typed class's
#: own type token, properties, provider version, aliases and secret fields, not through the typed
#: class: the typed classes' argument objects and type translation were half the SDK's cost per
#: resource (0.91 -> 0.46 ms per RoleBinding), and importing ``pulumi_kubernetes.core.v1`` and its
#: siblings a quarter of a small plan's CPU (issue 37). The aliases and secrets are the typed
#: classes' (``alias_opts``/``secret_opts`` in pulumi-kubernetes 4.34.2); tests/plan/test_generic_kinds.py
#: proves every registration of both stacks equal to the typed class's (inputs, options, aliases,
#: secrets, version) by running each stack once more with :data:`GENERIC` emptied.
BUILTIN: dict[tuple[str, str], Builtin] = dict(
    [
        *(_builtin("", k) for k in ("Namespace", "ConfigMap", "ResourceQuota", "LimitRange", "Service")),
        *(_builtin("", k) for k in ("ServiceAccount", "Pod", "NodePatch")),
        _builtin("", "Secret", secrets=("data", "stringData")),
        _builtin("apps", "DaemonSet", ("v1beta2", "extensions/v1beta1")),
        _builtin("apps", "Deployment", ("v1beta1", "v1beta2", "extensions/v1beta1")),
        _builtin("batch", "Job"),
        _builtin("batch", "CronJob", ("v1beta1", "v2alpha1")),
        _builtin("scheduling.k8s.io", "PriorityClass", _OLDER),
        *(_builtin(_RBAC, k, _OLDER) for k in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")),
        *(_builtin(_ADMISSION, k, _OLDER) for k in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")),
    ]
)

#: The kinds registered generically (all of :data:`BUILTIN`); the equivalence test empties it to
#: run the same program through the typed classes.
GENERIC: frozenset[tuple[str, str]] = frozenset(BUILTIN)


def apply(name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None) -> pulumi.CustomResource:
    """Register ``manifest`` as a resource with logical name ``name``.

    A built-in kind (:data:`BUILTIN`) is registered as its typed class registers it; any other kind
    becomes an ``apiextensions.CustomResource`` carrying every field (e.g. ``spec``) unchanged. A
    built-in kind must be in :data:`BUILTIN`: the provider knows the core group only as ``core/v1``,
    and the real engine refuses ``kubernetes:v1:<Kind>`` ("apiVersion does not have both a group and
    a version").
    """
    return _register(name, manifest, opts, manifest["kind"])


def apply_patch(
    name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
) -> pulumi.CustomResource:
    """Register ``manifest`` as a server-side-apply patch (``NodePatch``): Pulumi owns only the fields it sends."""
    return _register(name, manifest, opts, f"{manifest['kind']}Patch")


def _register(
    name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions | None, kind: str
) -> pulumi.CustomResource:
    api, metadata = manifest["apiVersion"], manifest.get("metadata")
    # A gated body (components.guards.gate) is an Output: its name was checked before it was gated.
    if not isinstance(metadata, pulumi.Output) and not (metadata or {}).get("name"):
        raise ValueError(f"{kind} {name!r} has no metadata.name: cluster objects are always named explicitly")
    builtin = BUILTIN.get((api, kind))
    if builtin is None and "/" not in api:
        # The provider reads an untyped kind as a custom resource, group/version: a core kind
        # registered that way fails only at `pulumi up` ("apiVersion does not have both a group
        # and a version"), after everything before it was created.
        raise ValueError(f"{kind} {name!r}: core kind {api}/{kind} has no entry in components/k8s.py BUILTIN")
    if builtin is not None and (api, kind) in GENERIC:
        return _BuiltinObject(name, builtin, manifest, opts)
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    if builtin is not None:
        module, cls = builtin.typed
        typed = getattr(importlib.import_module(f"pulumi_kubernetes.{module}"), cls)
        return typed(name, opts=opts, **{_snake(k): v for k, v in fields.items()})  # type: ignore[no-any-return]
    if set(fields) - {"metadata", "spec"}:
        return _CustomObject(name, manifest, opts)
    return k8s.apiextensions.CustomResource(name, api_version=api, kind=manifest["kind"], opts=opts, **fields)


class _BuiltinObject(pulumi.CustomResource):
    """A built-in kind of :data:`BUILTIN`, registered as its typed class would register it."""

    def __init__(
        self, name: str, builtin: Builtin, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions | None
    ) -> None:
        props = dict(manifest)
        # As the typed class: the provider's defaults (its version) first, the caller's options,
        # its secret fields, then its aliases.
        merged = pulumi.ResourceOptions.merge(k8s._utilities.get_resource_opts_defaults(), opts)
        if builtin.secrets:
            for key in builtin.secrets:
                if props.get(key) is not None:
                    props[key] = pulumi.Output.secret(props[key])
            merged = pulumi.ResourceOptions.merge(
                merged, pulumi.ResourceOptions(additional_secret_outputs=list(builtin.secrets))
            )
        if builtin.aliases:
            merged = pulumi.ResourceOptions.merge(
                merged, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=a) for a in builtin.aliases])
            )
        super().__init__(builtin.token, name, props, merged)


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
