"""The placement solver: a layout can fit by slice counts yet have no placement."""

from __future__ import annotations

import pytest

from components.model.catalog import GPU_MODELS, GpuModel, MigProfile
from components.model.mig import LayoutError, check_layout, place

# A synthetic 4-slice GPU where the 2-slice profile may only start at slice 1: two of them fit
# by count (4 memory slices) but overlap wherever they are put.
ODD = GpuModel("odd", 40, 4, 4, (MigProfile("2g.20gb", 2, 2, (1,), 2), MigProfile("1g.10gb", 1, 1, (0, 1, 2, 3), 4)))


def test_fits_by_count_but_not_by_placement() -> None:
    assert place({"2g.20gb": 2}, ODD) is None
    with pytest.raises(LayoutError, match="no valid placement"):
        check_layout({"2g.20gb": 2}, ODD)


def test_placement_is_non_overlapping_and_uses_allowed_starts() -> None:
    gpu = GPU_MODELS["H100-80GB"]
    placement = place({"4g.40gb": 1, "1g.10gb": 3}, gpu)
    assert placement is not None
    used: set[int] = set()
    for name, start in placement:
        profile = gpu.profile(name)
        assert profile is not None and start in profile.starts
        span = set(range(start, start + profile.memory))
        assert not used & span
        used |= span


def test_slice_seven_needs_a_profile_that_can_reach_it() -> None:
    # 3g.40gb must take start 4 so four 1g.10gb fit in slices 0..3.
    assert place({"3g.40gb": 1, "1g.10gb": 4}, GPU_MODELS["H100-80GB"]) == [
        ("3g.40gb", 4),
        ("1g.10gb", 0),
        ("1g.10gb", 1),
        ("1g.10gb", 2),
        ("1g.10gb", 3),
    ]
