"""Strings and numbers checked with their consumer's grammar (issue 35, item 15).

Each refusal beside its allowed twin, through :func:`components.loader.parse_config` as a stack
is read: the problem names the key, the value and what is allowed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from components.loader import parse_config
from components.model import kubernetes
from components.model.catalog import GPU_MODELS
from components.model.errors import ConfigError
from components.model.mig import parse_layout
from components.model.types import GO_DURATION_MAX_SECONDS, INT32_MAX, parse_pkey
from tests.conftest import raw_stack

GO_MAX_DAYS = GO_DURATION_MAX_SECONDS // 86400  # 106751 days fit, 106752 do not

#: (key, refused, allowed, what the message must say of the refused value)
CASES: list[tuple[str, Any, Any, str]] = [
    # image repositories: no tag, no uppercase, no space, not empty
    (
        "versions.kueueImage",
        "registry.k8s.io/kueue/kueue:v0.19.2",
        "registry.k8s.io/kueue/kueue",
        "not an image repository",
    ),
    (
        "versions.kueueImage",
        "registry.k8s.io/Kueue/kueue",
        "registry.example.com:5000/kueue/kueue",
        "not an image repository",
    ),
    ("versions.kueueImage", "registry.k8s.io/kueue /kueue", "localhost/kueue", "not an image repository"),
    ("versions.draDriverRepository", "", "nvcr.io/nvidia", "not an image repository"),
    ("versions.draDriverRepository", "nvcr.io/nv idia", "mirror.example.com/nvidia", "not an image repository"),
    # OCI chart references
    ("versions.kueueChartRef", "not a ref", "oci://registry.k8s.io/kueue/charts/kueue", "not an OCI chart reference"),
    ("versions.kueueChartRef", "", "oci://harbor.example.com:8443/charts/kueue", "not an OCI chart reference"),
    (
        "versions.kueueChartRef",
        "oci://registry.k8s.io/kueue; touch x",
        "oci://localhost/kueue",
        "not an OCI chart reference",
    ),
    (
        "versions.kueueChartRef",
        "oci://registry.k8s.io/kueue/charts/kueue:0.19.2",
        "oci://r.io/k",
        "not an OCI chart reference",
    ),
    ("versions.kueueChartRef", "oci://kueue", "oci://r.example.com/kueue", "not an OCI chart reference"),
    (
        "versions.kueueChartRef",
        "https://registry.k8s.io/kueue",
        "oci://r.example.com/x/kueue",
        "not an OCI chart reference",
    ),
    # repository URLs without credentials
    (
        "versions.helmRepository",
        "https://bot:s3cret@charts.example.com/nvidia",
        "https://charts.example.com/nvidia",
        "***@",
    ),
    (
        "versions.helmRepository",
        "https://token@charts.example.com/",
        "http://charts.example.com:8080/",
        "credentials removed",
    ),
    (
        "versions.hamiHelmRepository",
        "https://u:p@project-hami.github.io/HAMi/",
        "https://project-hami.github.io/HAMi/",
        "***@",
    ),
    ("versions.helmRepository", "https://[::1/charts", "https://[::1]/charts", "not a repository URL"),
    # int32
    ("queues.replicas", INT32_MAX + 1, INT32_MAX, f"at most {INT32_MAX}"),
    # Go durations
    ("queues.podsReadyTimeoutSeconds", GO_DURATION_MAX_SECONDS + 1, GO_DURATION_MAX_SECONDS, "Go duration"),
    ("queues.helmTimeoutSeconds", 10**12, GO_DURATION_MAX_SECONDS, "Go duration"),
    ("network.helmTimeoutSeconds", GO_DURATION_MAX_SECONDS + 1, 3600, "Go duration"),
    ("gpuOperator.helmTimeoutSeconds", 2**63, 3600, "Go duration"),
    ("observability.idle.window", f"{GO_MAX_DAYS + 1}d", f"{GO_MAX_DAYS}d", "Go duration"),
    ("observability.starvationWindow", f"{GO_DURATION_MAX_SECONDS + 1}s", f"{GO_DURATION_MAX_SECONDS}s", "Go duration"),
    # ASCII digits only (Python's \d takes every Unicode digit; Go's, Helm's and the kubelet's do not)
    ("versions.kueueChart", "0.１9.2", "0.19.2", "not a pinned chart version"),
    ("versions.gpuOperatorChart", "v٢٦.7.0", "v26.7.0", "not a pinned chart version"),
    ("platform.kubernetesVersion", "1.３6.3", "1.36.3", "not a Kubernetes version"),
]


@pytest.mark.parametrize(("text", "twin"), [("１", "1"), ("0x１", "0x1"), ("٣", "3")])
def test_a_pkey_is_written_in_ascii_digits(text: str, twin: str) -> None:
    with pytest.raises(ValueError, match="not a P_Key"):
        parse_pkey(text)
    assert parse_pkey(twin) == int(twin, 0)


def _set(raw: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = raw
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


def _problems(key: str, value: Any) -> list[str]:
    raw = raw_stack("onprem")
    _set(raw, key, value)
    try:
        parse_config(raw)
    except ConfigError as err:
        return [str(i) for i in err.issues]
    return []


@pytest.mark.parametrize(("key", "bad", "good", "says"), CASES, ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_a_value_its_consumer_cannot_read_is_refused_naming_key_and_value(
    key: str, bad: Any, good: Any, says: str
) -> None:
    mine = [p for p in _problems(key, bad) if p.startswith(f"gpuaas:{key}:")]
    assert mine, f"{key}: {bad!r} was accepted"
    assert says in mine[0], mine
    if "credentials removed" in mine[0] or "***@" in mine[0]:
        assert "s3cret" not in mine[0] and ":p@" not in mine[0] and "bot:" not in mine[0], mine
    else:
        assert repr(bad) in mine[0] or str(bad) in mine[0], mine


@pytest.mark.parametrize(("key", "bad", "good", "says"), CASES, ids=[f"{c[0]}={c[2]!r}" for c in CASES])
def test_its_allowed_twin_is_accepted(key: str, bad: Any, good: Any, says: str) -> None:
    assert [p for p in _problems(key, good) if p.startswith(f"gpuaas:{key}:")] == []


@pytest.mark.parametrize("text", ["１.36.3", "1.٣٦", "v1.36.３"])
def test_the_version_table_reads_ascii_digits_only(text: str) -> None:
    assert kubernetes.parse(text) is None
    assert kubernetes.parse(text.translate(str.maketrans("１٣٦３", "1363"))) is not None


def test_a_mig_layout_counts_in_ascii_digits() -> None:
    h100 = GPU_MODELS["H100-80GB"]
    with pytest.raises(ValueError):
        parse_layout("７x1g.10gb", h100)
    assert parse_layout("7x1g.10gb", h100)


def test_no_pattern_in_the_components_takes_unicode_digits() -> None:
    r"""The class, not the example: ``\d`` in a Python pattern matches every Unicode digit
    (fullwidth, Arabic-Indic), and ``int()`` reads them; patterns write ``[0-9]``."""
    root = Path(__file__).resolve().parents[2] / "components"
    found = [
        f"{f.relative_to(root.parent)}:{n}"
        for f in sorted(root.rglob("*.py"))
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if re.search(r"\\d", line) and not line.lstrip().startswith("#")
    ]
    assert found == []
