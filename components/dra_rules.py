"""Rules of the DRA resource model (``gpuOperator.resourceModel: dra``), run by :func:`components.rules.check`.

Each refusal names the key to edit and says what upstream supports; the facts are in
:mod:`components.dra`'s docstring with their sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from components import versions
from components.config import AksPlatform, StackConfig
from components.errors import Issue
from components.rules import sharing_groups

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``1.34``, ``1.34.4`` or ``v26.7.0`` as a tuple; ``None`` for anything else (``1.34.4-gke.1``)."""
    m = _VERSION.match(text.strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _release(tag: str) -> tuple[int, ...]:
    """``v26.7.0`` (or ``v26.7.0-rc.1``, compared by its release numbers) as a tuple."""
    return tuple(int(n) for n in re.findall(r"\d+", tag.split("-", 1)[0])[:3])


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(str(n) for n in v)


def dra_issues(cfg: StackConfig) -> Iterator[Issue]:
    """Every problem of a DRA stack (and a malformed declared version on any stack)."""
    p = cfg.platform
    key = "gpuaas:platform.kubernetesVersion"
    declared = p.kubernetes_version
    parsed = parse_version(declared) if declared is not None else None
    if declared is not None and parsed is None:
        yield Issue(key, f"{declared!r} is not a Kubernetes version; write MAJOR.MINOR[.PATCH], e.g. 1.34.4")
    if cfg.gpu_operator.resource_model != "dra":
        return
    need = versions.DRA_MIN_KUBERNETES
    if declared is None:
        yield Issue(
            key,
            f"is required with gpuOperator.resourceModel dra: declare the cluster's version (kubectl version), "
            f"{_fmt(need)} or newer",
        )
    elif parsed is not None and parsed[:2] < need:
        upgrade = "set a newer AKS version" if isinstance(p, AksPlatform) else "upgrade the cluster first"
        yield Issue(
            key,
            f"{declared}: resourceModel dra needs Kubernetes {_fmt(need)} or newer (DynamicResourceAllocation is GA "
            f"with resource.k8s.io/v1 from {_fmt(need)}); {upgrade}, or use resourceModel devicePlugin",
        )

    chart = cfg.versions.gpu_operator_chart  # a pinned vX.Y.Z[-pre] (types.ChartVersion)
    first = versions.GPU_OPERATOR_FIRST_GPUCLUSTER
    if _release(chart) < _release(first):
        yield Issue(
            "gpuaas:versions.gpuOperatorChart",
            f"{chart}: the GPUCluster CR (the DRA resource model) first ships in GPU Operator {first}",
        )

    if cfg.gpu_operator.mig_strategy == "single":
        yield Issue(
            "gpuaas:gpuOperator.migStrategy",
            "single: under DRA a MIG device is always a mig.nvidia.com device, never nvidia.com/gpu; "
            "the strategy is a device-plugin setting (remove it or set mixed)",
        )
    for where, _name, sharing, _model in sharing_groups(cfg):
        if sharing.time_slicing is not None:
            yield Issue(
                f"gpuaas:{where}.timeSlicing",
                "is not supported with resourceModel dra: the NVIDIA DRA driver (v0.5.0) shares a GPU only among "
                "the pods of one ResourceClaim; per-node replicas have no DRA equivalent and sharing across claims "
                "needs its alpha gates (TimeSlicingSettings, ConsumableShares). Give the group whole GPUs or MIG",
            )
    for i, team in enumerate(cfg.teams):
        if team.quota.time_sliced_gpus:
            yield Issue(
                f"gpuaas:teams[{i}].quota.timeSlicedGpus",
                f"{team.quota.time_sliced_gpus}: time-sliced GPUs are a device-plugin resource; under resourceModel "
                "dra quota whole GPUs (gpus) or MIG profiles (mig)",
            )
