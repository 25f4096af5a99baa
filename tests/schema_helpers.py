"""Checks of rendered objects against the pinned upstream charts and CRDs in ../shared/upstream.

Neither operator chart ships a ``values.schema.json`` (upstream-summary.md §5), so Helm would
silently ignore a misspelt key such as ``useHostMOFED``; these helpers make that a test failure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml


def value_paths(values: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf key path of a values tree (a non-empty mapping is descended, anything else is a leaf)."""
    for key, value in values.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from value_paths(value, path)
        else:
            yield path


def missing_value_paths(values: Mapping[str, Any], chart_values: Mapping[str, Any]) -> list[str]:
    """Dotted paths of ``values`` that the chart's ``values.yaml`` does not have.

    A path may go below a key whose chart default is an empty map (``nodeSelector: {}``,
    ``config.data: {}``) or null (``matchLabels:`` with only a commented example): those are
    free-form. A mapping where the chart has a scalar is missing.
    """
    missing: list[str] = []
    for path in value_paths(values):
        node: Any = chart_values
        for i, key in enumerate(path):
            if (node is None or (isinstance(node, Mapping) and not node)) and i > 0:
                break  # free-form map in the chart
            if not isinstance(node, Mapping) or key not in node:
                missing.append(".".join(path))
                break
            node = node[key]
    return missing


#: Values the GPU Operator chart reads (``.Values.<path> | default .Chart.AppVersion``) but leaves
#: commented out in its values.yaml (``#version: ""``), with the template that reads each.
GPU_OPERATOR_READ_NOT_LISTED: dict[str, str] = {
    "operator.version": "templates/_helpers.tpl",
    "validator.version": "templates/clusterpolicy.yaml",
    "nodeStatusExporter.version": "templates/clusterpolicy.yaml",
}


def _without(values: Mapping[str, Any], dotted: str) -> dict[str, Any]:
    head, _, rest = dotted.partition(".")
    out = {k: v for k, v in values.items() if k != head}
    if head in values and rest and isinstance(values[head], Mapping):
        inner = _without(values[head], rest)
        if inner:
            out[head] = inner
    return out


def assert_value_paths_exist(
    values: Mapping[str, Any], values_yaml_path: Path, read_not_listed: Mapping[str, str] | None = None
) -> None:
    """Fail, listing every offender, unless each key path of ``values`` exists in ``values_yaml_path``
    (or is one of ``read_not_listed``: paths the chart's templates read that values.yaml leaves out)."""
    for dotted in read_not_listed or {}:
        values = _without(values, dotted)
    chart_values = yaml.safe_load(values_yaml_path.read_text()) or {}
    missing = missing_value_paths(values, chart_values)
    assert not missing, f"not in {values_yaml_path}: {', '.join(missing)}"


# --------------------------------------------------------------------------------------------
# CRDs: a rendered custom resource against the CRD's openAPIV3Schema, unknown fields refused


def crd_schema(crd_path: Path, api_version: str, kind: str) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``kind`` at ``api_version`` (``group/version``) in ``crd_path``."""
    group, _, version = api_version.rpartition("/")
    for doc in yaml.safe_load_all(crd_path.read_text()):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        if spec["group"] != group or spec["names"]["kind"] != kind:
            continue
        for v in spec["versions"]:
            if v["name"] == version:
                return dict(v["schema"]["openAPIV3Schema"])
        raise AssertionError(f"{crd_path} serves {kind} but not version {version!r}")
    raise AssertionError(f"{crd_path} has no CustomResourceDefinition for {api_version} {kind}")


def strict(schema: Any) -> Any:
    """A copy of ``schema`` where every object that lists ``properties`` refuses other keys.

    That is what the API server does with strict field validation (and what pruning does
    silently otherwise): a field the CRD does not list never reaches the operator. Objects marked
    ``x-kubernetes-preserve-unknown-fields`` or with their own ``additionalProperties`` are kept.
    """
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_errors(obj: Mapping[str, Any], crd_path: Path) -> list[str]:
    """Every schema violation of ``obj`` as ``path: message`` (empty when valid)."""
    from jsonschema import Draft4Validator

    schema = strict(crd_schema(crd_path, obj["apiVersion"], obj["kind"]))
    validator = Draft4Validator(schema)
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]


def validate_against_crd(obj: Mapping[str, Any], crd_path: Path) -> None:
    """Fail, listing every violation, unless ``obj`` is valid for its CRD with unknown fields refused."""
    errors = crd_errors(obj, crd_path)
    assert not errors, f"{obj['kind']} {obj.get('metadata', {}).get('name')!r} vs {crd_path}:\n" + "\n".join(errors)
