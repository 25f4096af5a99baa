"""How the program's own Python process runs: its garbage collector and the SDK's debug messages.

Why this exists: under the real engine a run keeps every resource, Output and future alive until
it ends, and with them the outputs the engine sends back (a NodePatch's whole live Node, every
object's live state), as Python dicts. At the collector's default thresholds (700, 10, 10) it walks
that growing heap again and again. In a no-change ``pulumi preview`` of the 1000-node / 256-team
fleet (benchmarks/fleet_scale.py --engine, BENCHMARKS.md) collection was half of the program's CPU:
41.2 s of Python CPU with the defaults, 20.7 s with collection off (peak RSS 286 -> 372 MB), 22.3 s
with :data:`GC_THRESHOLDS` (290 MB). The program is the one serial part of a preview (the engine
and the provider run in parallel beside it), so its CPU is the preview's wall time: 75 s -> 45 s.

The thresholds, not ``gc.disable()``: nearly all the time back at none of the memory. The offline
plan pauses collection outright instead (components/plan/offline.py ``gc_paused``): it holds no
engine outputs, and its heap is measured there.

The SDK's debug messages: it sends three per resource ("registering resource", "registration
prepared", "successful"), each a blocking ``Log`` call to the engine from the event loop, which the
engine shows only under ``--debug``. In the same preview that was 8,600 round trips and 11 s of its
51 s (40 s without them). :func:`drop_sdk_debug` drops them unless ``GPUAAS_SDK_DEBUG`` asks for
them (README, "Running for real"); warnings and errors are untouched.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any

import pulumi.log

#: (young generation's allocations, young collections per middle, middle per old). The young
#: threshold decides how often anything runs; the other two how often the whole heap is walked.
GC_THRESHOLDS: tuple[int, int, int] = (100_000, 50, 100)


def tune_collector() -> tuple[int, int, int]:
    """Raise each of the collector's thresholds to at least :data:`GC_THRESHOLDS`; return the old ones.

    Never lowers one a caller set higher, and leaves collection on or off as it was.
    """
    old = gc.get_threshold()
    gc.set_threshold(*(max(have, want) for have, want in zip(old, GC_THRESHOLDS, strict=True)))
    return old[0], old[1], old[2]


#: The environment variable that keeps the SDK's debug messages (``1`` or ``true``; set it beside
#: ``pulumi up --debug``).
SDK_DEBUG_ENV = "GPUAAS_SDK_DEBUG"
_ON, _OFF = ("1", "true"), ("", "0", "false")
_SDK_DEBUG: Callable[..., None] = pulumi.log.debug


def _dropped(*_args: Any, **_kwargs: Any) -> None:
    """What ``pulumi.log.debug`` becomes: nothing is sent."""


def drop_sdk_debug(environ: Mapping[str, str]) -> str | None:
    """Make ``pulumi.log.debug`` a no-op unless ``environ`` sets :data:`SDK_DEBUG_ENV` on (then restore it).

    Returns a warning for a value that is neither on nor off (the messages are dropped then), else None.
    """
    value = environ.get(SDK_DEBUG_ENV, "")
    if value.strip().lower() in _ON:
        pulumi.log.debug = _SDK_DEBUG
        return None
    pulumi.log.debug = _dropped
    if value.strip().lower() in _OFF:
        return None
    return f"{SDK_DEBUG_ENV}={value!r}: not one of 1, true, 0, false (or unset); the SDK's debug messages are dropped"
