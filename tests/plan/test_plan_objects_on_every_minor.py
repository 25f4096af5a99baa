"""Every built-in object the plans send is valid, as sent, on every Kubernetes minor a stack may run.

The minors are the support table's (components/model/kubernetes.py) on the day it was reviewed; the
schemas are kubernetes-validate's, generated from each minor's OpenAPI, so an API version a minor
no longer serves (or does not serve yet) has no schema there and fails. tests/e2e checks the same
objects against the real servers' discovery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components.model import kubernetes
from components.plan.offline import run_program, stack_config
from e2e.plan_apply import planned_objects
from tests.conftest import ROOT, offline_run

DRA_STACK = ROOT / "tests/stacks/onprem-dra.yaml"
MINORS = [s.name for s in kubernetes.supported(kubernetes.REVIEWED, aks=False)]


def builtin(api_version: str) -> bool:
    """Whether Kubernetes itself serves the group (core, apps, batch, policy, autoscaling, ``*.k8s.io``)."""
    group = api_version.rpartition("/")[0]
    return group in ("", "apps", "batch", "policy", "autoscaling") or group.endswith(".k8s.io")


def _objects() -> list[tuple[str, dict[str, Any]]]:
    runs = {
        "onprem": offline_run("onprem"),
        "aks": offline_run("aks"),
        "onprem-dra": run_program("onprem", config=stack_config("onprem", DRA_STACK)),
    }
    return [(stack, p.obj) for stack, run in runs.items() for p in planned_objects(run) if builtin(p.obj["apiVersion"])]


@pytest.fixture(scope="module")
def objects() -> list[tuple[str, dict[str, Any]]]:
    return _objects()


def test_the_schemas_cover_every_supported_minor() -> None:
    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    for minor in MINORS:
        assert (schemas / f"v{minor}.0-local-strict").is_dir(), (
            f"kubernetes-validate has no schemas for {minor}: pin a newer one in requirements-dev.txt"
        )


@pytest.mark.parametrize("minor", MINORS)
def test_every_builtin_object_is_valid_on_the_minor(minor: str, objects: list[tuple[str, dict[str, Any]]]) -> None:
    assert {o["apiVersion"] for _s, o in objects} >= {"v1", "apps/v1", "resource.k8s.io/v1"}, "all three plans"
    problems = []
    for stack, obj in objects:
        try:
            kubernetes_validate.validate(obj, f"{minor}.0", strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as err:
            problems.append(f"{stack}: {obj['apiVersion']} {obj['kind']} {obj['metadata'].get('name')}: {err}")
    assert not problems, "\n".join(problems)


def test_an_api_a_minor_no_longer_serves_fails_the_check() -> None:
    """The allowed twin beside the refusal: flowcontrol v1beta3 was removed in 1.32; v1 is served."""
    schema: dict[str, Any] = {
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "x"},
        "spec": {"type": "Exempt"},
    }
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate({**schema, "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3"}, "1.35.0", True)
    kubernetes_validate.validate({**schema, "apiVersion": "flowcontrol.apiserver.k8s.io/v1"}, "1.35.0", strict=True)
