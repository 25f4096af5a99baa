"""Per-config memos: values derived from one :class:`StackConfig` are computed once per config.

A plan asks the same fleet-wide questions once per team (a team's quota ceilings read every
flavor's capacity, which counts every node): with 1000 teams on 4000 nodes that was four million
node visits, and the plan grew with teams x nodes (issue #21, item 14). A config is frozen, so a
value derived from it stays true while it lives; the memo keys by the config object itself
(identity, checked on every hit) and keeps only the last few configs, so tests that build many
configs hold no more than a handful. Results are copied out when mutable, so no caller can
change another's view.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

C = TypeVar("C")
R = TypeVar("R")

#: Configs remembered per memo: a plan has one; the rules and the writer may look at a second.
_KEEP = 4


def per_config(fn: Callable[[C], R]) -> Callable[[C], R]:
    """Memoise ``fn(cfg)`` by the identity of ``cfg``; every caller gets the one value (for a private
    helper whose callers only read it, or fill it as a memo of their own)."""
    return _memo(fn, None)


def per_config_copied(copier: Callable[[R], R]) -> Callable[[Callable[[C], R]], Callable[[C], R]]:
    """:func:`per_config`, each caller getting ``copier(value)``: a public value no caller can change."""
    return lambda fn: _memo(fn, copier)


def _memo(fn: Callable[[C], R], copier: Callable[[R], R] | None) -> Callable[[C], R]:
    cache: dict[int, tuple[C, R]] = {}

    @functools.wraps(fn)
    def memoised(cfg: C) -> R:
        hit = cache.get(id(cfg))
        if hit is None or hit[0] is not cfg:
            if len(cache) >= _KEEP:
                cache.clear()
            hit = cache[id(cfg)] = (cfg, fn(cfg))
        return hit[1] if copier is None else copier(hit[1])

    return memoised
