"""What every area's rules share: the config key an issue names."""

from __future__ import annotations

from collections import Counter


def config_key(where: str, *rest: str) -> str:
    """``config_key("teams[1].partition", "pkey")`` → ``gpuaas:teams[1].partition.pkey``."""
    return "gpuaas:" + ".".join([where, *rest])


def dupes(values: list[str]) -> set[str]:
    """The values that occur more than once."""
    return {v for v, n in Counter(values).items() if n > 1}
