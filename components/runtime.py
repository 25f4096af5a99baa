"""How the program's own Python process runs: its cyclic garbage collector, tuned for one long run.

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
"""

from __future__ import annotations

import gc

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
