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
    ``config.data: {}``): those are free-form. A mapping where the chart has a scalar is missing.
    """
    missing: list[str] = []
    for path in value_paths(values):
        node: Any = chart_values
        for i, key in enumerate(path):
            if isinstance(node, Mapping) and not node and i > 0:
                break  # free-form map in the chart
            if not isinstance(node, Mapping) or key not in node:
                missing.append(".".join(path))
                break
            node = node[key]
    return missing


def assert_value_paths_exist(values: Mapping[str, Any], values_yaml_path: Path) -> None:
    """Fail, listing every offender, unless each key path of ``values`` exists in ``values_yaml_path``."""
    chart_values = yaml.safe_load(values_yaml_path.read_text()) or {}
    missing = missing_value_paths(values, chart_values)
    assert not missing, f"not in {values_yaml_path}: {', '.join(missing)}"
