"""Rules of ``gpuaas:observability``: prices and weights name kinds the fleet has, windows that fit the rules.

The model they check is :mod:`components.model.observability` and :mod:`components.model.accounting`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from components.model.capacity import sharing_groups
from components.model.catalog import GPU_MODELS
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.observability import duration_seconds

#: Labels the alerts set themselves: routing labels may not overwrite them.
RESERVED_ALERT_LABELS: Final = frozenset({"alertname", "team", "severity", "node_group", "namespace", "node", "xid"})
#: The idle alert averages utilization over this window before ``for`` counts (rules.py IDLE_SMOOTHING).
IDLE_SMOOTHING_SECONDS: Final = 300


def _key(*rest: str) -> str:
    return "gpuaas:observability." + ".".join(rest)


def check(cfg: StackConfig) -> Iterator[Issue]:
    o = cfg.observability
    if not o.enabled:
        return
    fleet_models = sorted({model for _w, _g, _s, model in sharing_groups(cfg) if model in GPU_MODELS})
    fleet_profiles = sorted({p.name for m in fleet_models for p in GPU_MODELS[m].profiles})
    for model in sorted(o.prices.gpu_models):
        if model not in GPU_MODELS:
            yield Issue(
                _key(f'prices.gpuModels["{model}"]'),
                f"unknown GPU model {model!r}; allowed: {', '.join(GPU_MODELS)}",
            )
    for what, mapping in (("prices.migProfiles", o.prices.mig_profiles), ("migWeights", o.mig_weights)):
        for profile in sorted(mapping):
            if profile not in fleet_profiles:
                allowed = ", ".join(fleet_profiles) or "none (no GPU of the fleet has MIG)"
                yield Issue(
                    _key(f'{what}["{profile}"]'),
                    f"{profile!r} is no MIG profile of the fleet's GPUs ({', '.join(fleet_models)}); allowed: {allowed}",  # noqa: E501
                )
    step = duration_seconds(o.evaluation_interval)
    if step > IDLE_SMOOTHING_SECONDS:
        yield Issue(
            _key("evaluationInterval"),
            f"{o.evaluation_interval} is longer than the idle alert's 5m utilization average; allowed: 5m or less",
        )
    for key, window in (("idle.window", o.idle.window), ("starvationWindow", o.starvation_window)):
        if duration_seconds(window) < max(2 * step, IDLE_SMOOTHING_SECONDS):
            yield Issue(
                _key(key),
                f"{window} is shorter than 5m or two evaluation intervals ({o.evaluation_interval}): "
                "an alert over it would fire on one sample",
            )
    for label in sorted(o.alert_labels):
        if label in RESERVED_ALERT_LABELS:
            yield Issue(
                _key(f'alertLabels["{label}"]'),
                f"{label!r} is set by the alerts themselves; allowed: any other label "
                f"(reserved: {', '.join(sorted(RESERVED_ALERT_LABELS))})",
            )
