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
    kinds = {token for token, _aliases in k8s.GENERIC.values()}
    generic = run_program(stack, config=config)
    monkeypatch.setattr(k8s, "GENERIC", {})
    typed = run_program(stack, config=config)
    assert _registrations(generic) == _registrations(typed)
    assert plan_files(generic) == plan_files(typed)
    # The comparison is about something: the stack registers the generic kinds, with aliases and a version.
    used = [r for r in generic.records if r.type in kinds]
    assert used and all(r.version for r in used)
    if which != "aks":
        assert any(r.aliases for r in used if r.type.endswith(":RoleBinding"))
