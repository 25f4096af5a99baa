"""The one builder of ValidatingAdmissionPolicies and their bindings (admissionregistration.k8s.io/v1).

Every guard gpuaas puts on team workloads — the network, partition and pool guards
(:mod:`components.tenancy.admission`), the DRA claim guards (:mod:`components.dra.tenancy`) and the
queue guards (:mod:`components.queueing.admission`) — is a policy and a binding of this shape:
``failurePolicy: Fail`` (a guard that cannot run refuses), ``Deny`` on every violation, labelled as
gpuaas's, and matching team namespaces by the team label unless a guard must see every namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from components.k8s import Manifest
from components.tenancy.labels import PART_OF, TEAM_LABEL

API_VERSION = "admissionregistration.k8s.io/v1"
#: Every container list of a PodSpec, what a guard on pod resources walks. Ephemeral containers may
#: not set resources (API validation), but are checked anyway so the guard does not rest on that.
#: Pod-level ``spec.resources`` allows cpu and memory only (PodLevelResources), so no extended
#: resource can hide there.
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def team_namespaces(*extra: dict[str, Any]) -> dict[str, Any]:
    """A namespaceSelector of every team namespace (the team label exists), narrowed by ``extra`` expressions."""
    return {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}, *extra]}


def resource_rule(group: str, version: str, operations: Sequence[str], resources: Sequence[str]) -> dict[str, Any]:
    """One ``matchConstraints.resourceRules`` entry."""
    return {
        "apiGroups": [group],
        "apiVersions": [version],
        "operations": list(operations),
        "resources": list(resources),
    }


def validations(checks: Iterable[tuple[str, str, str]]) -> list[dict[str, str]]:
    """``(name, CEL expression that must be true, message)`` rows as ``Forbidden`` validations."""
    return [{"expression": expr, "message": msg, "reason": "Forbidden"} for _name, expr, msg in checks]


def policy(
    name: str,
    *,
    rules: Sequence[dict[str, Any]],
    validations: Sequence[dict[str, str]],
    variables: Sequence[dict[str, str]] = (),
    namespaces: dict[str, Any] | None = None,
    match_policy: str | None = None,
) -> Manifest:
    """A ValidatingAdmissionPolicy on ``rules``; ``namespaces``: its namespaceSelector (``None``: every namespace)."""
    constraints: dict[str, Any] = {}
    if match_policy is not None:
        constraints["matchPolicy"] = match_policy
    if namespaces is not None:
        constraints["namespaceSelector"] = namespaces
    constraints["resourceRules"] = list(rules)
    spec: dict[str, Any] = {"failurePolicy": "Fail", "matchConstraints": constraints}
    if variables:
        spec["variables"] = list(variables)
    spec["validations"] = list(validations)
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(PART_OF)},
        "spec": spec,
    }


def binding(policy: str, namespaces: dict[str, Any] | None = None) -> Manifest:
    """The binding of ``policy`` (named like it), denying; ``namespaces``: its namespaceSelector (``None``: all)."""
    spec: dict[str, Any] = {"policyName": policy, "validationActions": ["Deny"]}
    if namespaces is not None:
        spec["matchResources"] = {"namespaceSelector": namespaces}
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": dict(PART_OF)},
        "spec": spec,
    }
