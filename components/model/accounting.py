"""What one unit of each GPU kind is worth, per node group: GPU-equivalents and price per hour.

A whole GPU is 1 GPU-equivalent. A MIG instance is its compute slices over the GPU's
(``1g.10gb`` on an H100: 1/7) unless ``observability.migWeights`` says otherwise; a time-sliced
share is 1 / the group's replicas (two shares of a GPU with ``replicas: 2`` are the GPU), and a
HAMi slice 1 / the group's ``splitCount`` (what a slice is at most by count: its memory and SM
share are the pod's choice, so this is the floor a team is charged per slice). The
recording rules (:mod:`components.observability.rules`), the showback command and the config
rules all read :func:`gpu_kinds`, so a slice is weighted and priced one way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.model import resources
from components.model.capacity import mig_counts, sharing_groups
from components.model.catalog import GPU_MODELS
from components.model.config import StackConfig

Sharing = Literal["whole", "mig", "time-slicing", "hami"]


@dataclass(frozen=True)
class GpuKind:
    """One extended resource a node group offers, with what one unit of it is worth."""

    node_group: str
    resource: str
    gpu_model: str
    sharing: Sharing
    profile: str | None
    """The MIG profile (``None`` for whole GPUs and shares)."""
    weight: float
    """GPU-equivalents of one unit."""
    price: float | None
    """Price of one unit for one hour, in ``observability.prices.currency``; ``None``: not priced."""


def mig_weight(cfg: StackConfig, gpu_model: str, profile: str) -> float:
    """GPU-equivalents of one ``profile`` instance: the configured weight, else compute slices / the GPU's."""
    if profile in cfg.observability.mig_weights:
        return cfg.observability.mig_weights[profile]
    gpu = GPU_MODELS[gpu_model]
    p = gpu.profile(profile)
    return p.compute / gpu.compute_slices if p is not None else 1.0


def _price(cfg: StackConfig, gpu_model: str, profile: str | None, weight: float) -> float | None:
    prices = cfg.observability.prices
    if profile is not None and profile in prices.mig_profiles:
        return prices.mig_profiles[profile]
    if gpu_model in prices.gpu_models:
        return prices.gpu_models[gpu_model] * weight
    return None


def gpu_kinds(cfg: StackConfig) -> list[GpuKind]:
    """Every (node group, GPU resource) of the fleet, platform order, resources sorted.

    With ``migStrategy: single`` a MIG group offers its one profile as ``nvidia.com/gpu``.
    Assumes the config passed the rules (known GPU models, valid layouts).
    """
    out: list[GpuKind] = []
    for _where, group, sharing, model in sharing_groups(cfg):
        if model not in GPU_MODELS:
            continue
        counts = mig_counts(sharing, model)
        if counts:
            for profile in sorted(counts):
                weight = mig_weight(cfg, model, profile)
                name = resources.GPU if cfg.gpu_operator.mig_strategy == "single" else resources.mig_resource(profile)
                out.append(GpuKind(group, name, model, "mig", profile, weight, _price(cfg, model, profile, weight)))
        elif sharing.hami is not None:
            weight = 1.0 / sharing.hami.split_count
            price = _price(cfg, model, None, weight)
            out.append(GpuKind(group, resources.HAMI_GPU, model, "hami", None, weight, price))
        elif sharing.time_slicing is not None:
            weight = 1.0 / sharing.time_slicing.replicas
            out.append(
                GpuKind(
                    group, resources.GPU_SHARED, model, "time-slicing", None, weight, _price(cfg, model, None, weight)
                )
            )
        else:
            out.append(GpuKind(group, resources.GPU, model, "whole", None, 1.0, _price(cfg, model, None, 1.0)))
    return out


def ksm_resource(resource: str) -> str:
    """The ``resource`` label kube-state-metrics gives an extended resource: every character
    outside ``[a-zA-Z0-9_]`` becomes ``_`` (kube-state-metrics v2.20.0 internal/store/utils.go
    ``SanitizeLabelName``), e.g. ``nvidia.com/mig-1g.10gb`` → ``nvidia_com_mig_1g_10gb``."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in resource)
