"""The shell (components/k8s.py) registers every core kind with its typed class.

An untyped core kind becomes a custom resource type ``kubernetes:v1:<Kind>``, which the real
provider refuses only at `pulumi up` ("apiVersion does not have both a group and a version"),
after everything registered before it was created (the observability scraper's token Secret did
this; the engine e2e caught it). The offline run records the type token the provider would see.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from components.plan.offline import Run


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_no_core_kind_is_registered_as_a_custom_resource(stack: str, run_of: Callable[[str], Run]) -> None:
    run = run_of(stack)
    kinds = {r.type for r in run.records if r.custom and r.type.startswith("kubernetes:")}
    assert "kubernetes:core/v1:Secret" in kinds or stack == "aks", kinds  # the typed twin is there
    untyped = sorted(t for t in kinds if t.startswith("kubernetes:v1:"))
    assert untyped == []
