"""MIG layouts: parse a named layout, prove it fits a GPU, render mig-parted configs.

A layout is what every GPU of a node group is cut into. Checking placement here means a bad
layout fails at ``pulumi preview`` instead of MIG Manager labelling the node
``nvidia.com/mig.config.state=failed`` after it has already evicted the GPU pods.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from components.model.catalog import GpuModel

DISABLED = "all-disabled"
_TERM = re.compile(r"^([0-9]+)x(.+)$")


class LayoutError(ValueError):
    """A layout that cannot be realised on a GPU; the message says what is allowed."""


def parse_layout(name: str, gpu: GpuModel) -> dict[str, int]:
    """Profile counts per GPU for a named layout; ``{}`` means MIG disabled.

    Accepted names: ``all-disabled``; ``all-balanced`` (mig-parted's 2×1g + 1×2g + 1×3g, or
    2×1g + 1×2g on 4-slice GPUs); ``all-<profile>`` (as many as fit, ``+`` written ``.``);
    and explicit ``<n>x<profile>`` terms joined by ``-`` such as ``1x4g.40gb-3x1g.10gb``.
    """
    if name == DISABLED:
        return {}
    if not gpu.profiles:
        raise LayoutError(f"{gpu.name} does not support MIG; only {DISABLED} is allowed")
    if name == "all-balanced":
        small = gpu.profiles[0].name
        two = next(p.name for p in gpu.profiles if p.compute == 2 and "+" not in p.name)
        balanced = {small: 2, two: 1}
        if gpu.compute_slices >= 7:
            balanced[next(p.name for p in gpu.profiles if p.compute == 3)] = 1
        return balanced
    if name.startswith("all-"):
        wanted = name.removeprefix("all-")
        for p in gpu.profiles:
            if p.name.replace("+", ".") == wanted:
                return {p.name: p.max_per_gpu}
        raise LayoutError(f"unknown profile {wanted!r} for {gpu.name}; {_allowed(gpu)}")
    counts: dict[str, int] = {}
    for term in name.split("-"):
        m = _TERM.match(term)
        if not m:
            raise LayoutError(
                f"{term!r} is not '<count>x<profile>'; write layouts like 1x4g.40gb-3x1g.10gb, "
                f"all-<profile>, all-balanced or {DISABLED}"
            )
        counts[m.group(2)] = counts.get(m.group(2), 0) + int(m.group(1))
    return counts


def _allowed(gpu: GpuModel) -> str:
    return "allowed: " + ", ".join(p.name for p in gpu.profiles)


def check_layout(counts: Mapping[str, int], gpu: GpuModel) -> None:
    """Raise :class:`LayoutError` unless every profile exists on ``gpu`` and a placement exists."""
    if not counts:
        return
    if not gpu.profiles:
        raise LayoutError(f"{gpu.name} does not support MIG; only {DISABLED} is allowed")
    for name, n in counts.items():
        profile = gpu.profile(name)
        if profile is None:
            raise LayoutError(f"profile {name!r} does not exist on {gpu.name}; {_allowed(gpu)}")
        if n < 1:
            raise LayoutError(f"profile {name!r} needs a count of at least 1 (got {n})")
        if n > profile.max_per_gpu:
            raise LayoutError(f"{n}x{name} exceeds the {profile.max_per_gpu} instances one {gpu.name} allows")
    profiles = {n: p for n in counts if (p := gpu.profile(n)) is not None}
    compute = sum(profiles[n].compute * c for n, c in counts.items())
    memory = sum(profiles[n].memory * c for n, c in counts.items())
    if compute > gpu.compute_slices:
        raise LayoutError(f"needs {compute} compute slices; {gpu.name} has {gpu.compute_slices}")
    if memory > gpu.memory_slices:
        raise LayoutError(f"needs {memory} memory slices; {gpu.name} has {gpu.memory_slices}")
    if place(counts, gpu) is None:
        raise LayoutError(
            f"no valid placement on {gpu.name}: the profiles fit by count but their allowed start "
            "slices overlap (see nvidia-smi mig -lgipp)"
        )


def place(counts: Mapping[str, int], gpu: GpuModel) -> list[tuple[str, int]] | None:
    """One placement ``[(profile, start_memory_slice)]`` or ``None``; largest profiles first."""
    items = sorted(
        (gpu.profile(n) for n, c in counts.items() for _ in range(c)),
        key=lambda p: (-p.memory, -p.compute, p.name),  # type: ignore[union-attr]
    )
    chosen: list[tuple[str, int]] = []

    def go(i: int, used: int) -> bool:
        if i == len(items):
            return True
        p = items[i]
        assert p is not None
        for start in p.starts:
            mask = ((1 << p.memory) - 1) << start
            if start + p.memory <= gpu.memory_slices and not used & mask:
                chosen.append((p.name, start))
                if go(i + 1, used | mask):
                    return True
                chosen.pop()
        return False

    return chosen if go(0, 0) else None


def mig_parted_config(layouts: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The MIG Manager ``config.yaml`` (mig-parted ``version: v1``) for named layouts.

    ``all-disabled`` is always present: it is ``migManager.config.default`` and what unlabelled
    nodes get. Source: NVIDIA/mig-parted api/spec/v1/spec.go; GPU Operator MIG docs.
    """
    configs: dict[str, Any] = {DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for name in sorted(layouts):
        counts = layouts[name]
        if name == DISABLED or not counts:
            continue
        configs[name] = [{"devices": "all", "mig-enabled": True, "mig-devices": dict(sorted(counts.items()))}]
    return {"version": "v1", "mig-configs": configs}
