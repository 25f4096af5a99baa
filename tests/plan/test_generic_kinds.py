"""The built-in kinds registered as a generic CustomResource (components/k8s.py ``GENERIC``, issue 37)
register exactly what their typed pulumi-kubernetes classes register.

Every resource of both stacks and of a fleet-shaped synthetic config is compared, run once with the
generic path and once with the typed classes: type, name, parent, inputs, dependencies, provider,
provider version, options, additional secret outputs and aliases. The plan files alone could not show
a dropped alias or version.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import astuple
from types import ModuleType
from typing import Any

import pulumi
import pytest

from components import k8s
from components.plan.offline import ROOT, Run, run_program
from components.plan.writer import plan_files
from tests.conftest import fixture_config


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_scale", ROOT / "benchmarks" / "plan_scale.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["plan_scale"] = mod
    spec.loader.exec_module(mod)
    return mod


def _config(which: str) -> tuple[str, dict[str, Any]]:
    if which == "synthetic":
        return "bench", _bench().synthetic_config(48, 24, 6, True)
    return which, fixture_config(which)


def _registrations(run: Run) -> list[tuple[Any, ...]]:
    return sorted(astuple(r) for r in run.records)  # every field of every record, inputs included


@pytest.mark.parametrize("which", ["onprem", "aks", "synthetic"])
def test_generic_kinds_register_what_the_typed_classes_do(which: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stack, config = _config(which)
    kinds = {k8s.BUILTIN[kind].token for kind in k8s.GENERIC}
    generic = run_program(stack, config=config)
    monkeypatch.setattr(k8s, "GENERIC", frozenset())
    typed = run_program(stack, config=config)
    assert _registrations(generic) == _registrations(typed)
    assert plan_files(generic) == plan_files(typed)
    # The comparison is about something: the stack registers the generic kinds, with aliases and a version.
    used = [r for r in generic.records if r.type in kinds]
    assert used and all(r.version for r in used)
    if which != "aks":
        assert any(r.aliases for r in used if r.type.endswith(":RoleBinding"))


_ROLE_REF = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}
#: The top-level fields of the kinds that have no ``spec`` (the typed classes refuse one).
_FIELDS: dict[str, dict[str, Any]] = {
    "Secret": {"data": {"a": "Yg=="}, "stringData": {"b": "c"}, "type": "Opaque"},
    "ConfigMap": {"data": {"k": "v"}},
    "ServiceAccount": {"automountServiceAccountToken": False},
    "PriorityClass": {"value": 10, "description": "d"},
    "Role": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    "ClusterRole": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    "RoleBinding": {"roleRef": _ROLE_REF, "subjects": [{"kind": "Group", "name": "g"}]},
    "ClusterRoleBinding": {"roleRef": _ROLE_REF, "subjects": [{"kind": "Group", "name": "g"}]},
}


def _every_kind() -> None:
    """One object of every built-in kind, with a parent's options and fields the secrets apply to."""
    opts = pulumi.ResourceOptions(protect=True, ignore_changes=["metadata.annotations"])
    for api, kind in sorted(k8s.BUILTIN):
        body: dict[str, Any] = {"apiVersion": api, "kind": kind.removesuffix("Patch"), "metadata": {"name": "x"}}
        body |= _FIELDS.get(kind, {"spec": {"field": kind}})
        register = k8s.apply_patch if kind.endswith("Patch") else k8s.apply
        register(f"{kind.lower()}-{api.replace('/', '-')}", body, opts)


def test_every_builtin_kind_registers_what_its_typed_class_does(monkeypatch: pytest.MonkeyPatch) -> None:
    generic = run_program("reuse", config={}, program=_every_kind)
    monkeypatch.setattr(k8s, "GENERIC", frozenset())
    typed = run_program("reuse", config={}, program=_every_kind)
    assert _registrations(generic) == _registrations(typed)
    types = {r.type for r in generic.records if r.custom}
    assert types == {b.token for b in k8s.BUILTIN.values()}
    secret = next(r for r in generic.records if r.type == "kubernetes:core/v1:Secret")
    assert sorted(secret.secret_outputs) == ["data", "stringData"]
    daemonset = next(r for r in generic.records if r.type == "kubernetes:apps/v1:DaemonSet")
    assert any("extensions/v1beta1:DaemonSet" in a for a in daemonset.aliases)


def test_a_core_kind_without_an_entry_is_refused_and_a_custom_kind_is_not() -> None:
    def program() -> None:
        k8s.apply("cr", {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {}})
        with pytest.raises(ValueError, match="core kind v1/Endpoints has no entry"):
            k8s.apply("ep", {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e"}})

    records = run_program("reuse", config={}, program=program).records
    assert [r.type for r in records if r.custom] == ["kubernetes:example.com/v1:Thing"]
