"""Render a chart from the upstream folder with the real Helm, as a Release would install it.

``helm template`` of the ``helm`` tool set (helm.sh/helm/v3 at the version pulumi-resource-kubernetes
links; e2e/toolchain.py), offline: a local chart directory, the values gpuaas sends (as a values
file, what a Release's ``values`` becomes), ``--kube-version`` for the templates' version checks and
``.Capabilities.KubeVersion``, and Helm's own built-in API versions. Hooks are rendered with the rest
(Helm runs them around an install); tests filter by kind.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from e2e import toolchain


def helm() -> Path:
    """The ``helm`` binary (built once, cached by version)."""
    return toolchain.build(toolchain.TOOLSETS["helm"]) / "helm"


def render(
    chart: Path, release: str, namespace: str, values: Mapping[str, Any], kube_version: str
) -> list[dict[str, Any]]:
    """Every object ``helm template`` renders, in its order (empty documents left out)."""
    with tempfile.TemporaryDirectory(prefix="gpuaas-helm-") as tmp:
        values_file = Path(tmp) / "values.yaml"
        values_file.write_text(yaml.safe_dump(dict(values), sort_keys=False))
        out = subprocess.run(
            [
                str(helm()),
                "template",
                release,
                str(chart),
                f"--namespace={namespace}",
                f"--kube-version={kube_version}",
                f"--values={values_file}",
            ],
            check=True,
            capture_output=True,
            text=True,
            env={"HOME": tmp, "HELM_CACHE_HOME": tmp, "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp},
            timeout=120,
        )
    return [d for d in yaml.safe_load_all(out.stdout) if d]
