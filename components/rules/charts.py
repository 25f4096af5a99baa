"""Rules of the chart source (``gpuaas:charts``): one mirror at most, and a mirror is the only source."""

from __future__ import annotations

from collections.abc import Iterator

from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.versions import KUEUE_CHART_REF, NVIDIA_HELM_REPO
from components.rules.common import config_key


def check(cfg: StackConfig) -> Iterator[Issue]:
    charts, v = cfg.charts, cfg.versions
    if charts.directory is not None and charts.registry is not None:
        yield Issue(
            config_key("charts"),
            f"both directory ({charts.directory!r}) and registry ({charts.registry!r}) are set; a stack takes "
            "its charts from one mirror: keep one of them",
        )
    mirror = charts.mirror
    if mirror is None:
        return
    # A mirror is where every chart comes from; a repository set beside it would be ignored
    # without a word, so it is refused instead.
    if v.helm_repository != NVIDIA_HELM_REPO:
        yield Issue(
            config_key("versions", "helmRepository"),
            f"{v.helm_repository!r} is ignored while gpuaas:{mirror} is set (every chart comes from the mirror); "
            f"remove it (default {NVIDIA_HELM_REPO}) or the mirror",
        )
    if v.kueue_chart_ref != KUEUE_CHART_REF:
        yield Issue(
            config_key("versions", "kueueChartRef"),
            f"{v.kueue_chart_ref!r} is ignored while gpuaas:{mirror} is set (every chart comes from the mirror); "
            f"remove it (default {KUEUE_CHART_REF}) or the mirror",
        )
