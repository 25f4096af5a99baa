"""components/model/mig.py, table-driven: named layouts, placement validity and the mig-parted config.

Valid and invalid layouts follow ../shared/reference/domain.md §1.1 (placements from the MIG User
Guide ``nvidia-smi mig -lgipp``) and §1.3 (mig-parted ``all-balanced``).
"""

from __future__ import annotations

import pytest

from components.model.catalog import GPU_MODELS, GpuModel
from components.model.mig import DISABLED, LayoutError, check_layout, mig_parted_config, parse_layout, place

H100 = GPU_MODELS["H100-80GB"]
A30 = GPU_MODELS["A30"]
#: A GPU without MIG (L40S-like); the catalog lists only MIG GPUs, so it is made up here.
NO_MIG = GpuModel("L40S", 48, 0, 0, ())

VALID = [
    # id, gpu, counts per GPU
    ("3g+3g", H100, {"3g.40gb": 2}),
    ("4g+3g", H100, {"4g.40gb": 1, "3g.40gb": 1}),
    ("4g+2g+1g", H100, {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}),
    ("3g+2g+1g+1g", H100, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
    ("2g+2g+3g", H100, {"2g.20gb": 2, "3g.40gb": 1}),
    ("7x1g", H100, {"1g.10gb": 7}),
    ("4x1g.20gb", H100, {"1g.20gb": 4}),
    ("1g+me-with-others", H100, {"1g.10gb+me": 1, "1g.10gb": 6}),
    ("7g", H100, {"7g.80gb": 1}),
    ("onprem-stack", H100, {"4g.40gb": 1, "1g.10gb": 3}),
    ("a30-4x1g", A30, {"1g.6gb": 4}),
    ("a30-2g+1g+1g", A30, {"2g.12gb": 1, "1g.6gb": 2}),
    ("h200-3g+3g", GPU_MODELS["H200-141GB"], {"3g.71gb": 2}),
]


@pytest.mark.parametrize(("gpu", "counts"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_layouts_have_a_placement(gpu: GpuModel, counts: dict[str, int]) -> None:
    check_layout(counts, gpu)
    placement = place(counts, gpu)
    assert placement is not None
    assert sorted(name for name, _ in placement) == sorted(n for n, c in counts.items() for _ in range(c))


INVALID = [
    # id, gpu, counts, message (a regex)
    (
        "unknown-profile",
        H100,
        {"5g.50gb": 1},
        r"profile '5g\.50gb' does not exist on H100-80GB; allowed: 1g\.10gb, 1g\.10gb\+me, 1g\.20gb, 2g\.20gb",
    ),
    ("other-gpus-profile", H100, {"1g.5gb": 7}, r"profile '1g\.5gb' does not exist on H100-80GB"),
    ("too-many-compute", H100, {"4g.40gb": 1, "2g.20gb": 2}, r"needs 8 compute slices; H100-80GB has 7"),
    ("too-many-memory", H100, {"3g.40gb": 1, "1g.20gb": 3}, r"needs 10 memory slices; H100-80GB has 8"),
    ("2x4g", H100, {"4g.40gb": 2}, r"2x4g\.40gb exceeds the 1 instances one H100-80GB allows"),
    ("4x1g.20gb+1g.10gb", H100, {"1g.20gb": 4, "1g.10gb": 1}, r"needs 9 memory slices; H100-80GB has 8"),
    ("8x1g", H100, {"1g.10gb": 8}, r"8x1g\.10gb exceeds the 7 instances one H100-80GB allows"),
    ("two-media-extensions", H100, {"1g.10gb+me": 2}, r"2x1g\.10gb\+me exceeds the 1 instances"),
    ("zero-count", H100, {"1g.10gb": 0}, r"needs a count of at least 1 \(got 0\)"),
    ("a30-3g", A30, {"3g.12gb": 1}, r"profile '3g\.12gb' does not exist on A30; allowed: 1g\.6gb"),
    ("a30-too-much", A30, {"2g.12gb": 2, "1g.6gb": 1}, r"needs 5 compute slices; A30 has 4"),
    ("no-mig-gpu", NO_MIG, {"1g.10gb": 1}, r"L40S does not support MIG; only all-disabled is allowed"),
]


@pytest.mark.parametrize(("gpu", "counts", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_layouts_say_why(gpu: GpuModel, counts: dict[str, int], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        check_layout(counts, gpu)


def test_disabled_is_valid_everywhere() -> None:
    for gpu in (H100, A30, NO_MIG):
        assert parse_layout(DISABLED, gpu) == {}
        check_layout({}, gpu)


NAMED = [
    # id, name, gpu, counts
    ("explicit", "1x4g.40gb-3x1g.10gb", H100, {"4g.40gb": 1, "1g.10gb": 3}),
    ("explicit-repeated-term", "1x1g.10gb-2x1g.10gb", H100, {"1g.10gb": 3}),
    ("all-profile", "all-1g.10gb", H100, {"1g.10gb": 7}),
    ("all-profile-me", "all-1g.10gb.me", H100, {"1g.10gb+me": 1}),
    ("all-3g", "all-3g.40gb", H100, {"3g.40gb": 2}),
    ("balanced-h100", "all-balanced", H100, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
    ("balanced-h200", "all-balanced", GPU_MODELS["H200-141GB"], {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
    ("balanced-a30", "all-balanced", A30, {"1g.6gb": 2, "2g.12gb": 1}),
    ("a30-all-1g", "all-1g.6gb", A30, {"1g.6gb": 4}),
]


@pytest.mark.parametrize(("name", "gpu", "counts"), [c[1:] for c in NAMED], ids=[c[0] for c in NAMED])
def test_named_layouts(name: str, gpu: GpuModel, counts: dict[str, int]) -> None:
    assert parse_layout(name, gpu) == counts
    check_layout(counts, gpu)


BAD_NAMES = [
    ("unknown-all-profile", "all-5g.50gb", H100, r"unknown profile '5g\.50gb' for H100-80GB; allowed: 1g\.10gb"),
    ("term-without-count", "4g.40gb-3x1g.10gb", H100, r"'4g\.40gb' is not '<count>x<profile>'"),
    ("no-mig-gpu-named", "all-balanced", NO_MIG, r"L40S does not support MIG; only all-disabled is allowed"),
    ("no-mig-gpu-explicit", "1x1g.10gb", NO_MIG, r"L40S does not support MIG"),
]


@pytest.mark.parametrize(("name", "gpu", "message"), [c[1:] for c in BAD_NAMES], ids=[c[0] for c in BAD_NAMES])
def test_bad_layout_names_say_why(name: str, gpu: GpuModel, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        parse_layout(name, gpu)


def test_explicit_name_with_unknown_profile_fails_in_check() -> None:
    counts = parse_layout("1x5g.50gb", H100)
    with pytest.raises(LayoutError, match=r"profile '5g\.50gb' does not exist on H100-80GB"):
        check_layout(counts, H100)


def test_all_balanced_is_valid_on_every_mig_gpu() -> None:
    for gpu in GPU_MODELS.values():
        check_layout(parse_layout("all-balanced", gpu), gpu)


# --------------------------------------------------------------------------------------------
# mig-parted config (NVIDIA/mig-parted api/spec/v1)


def test_mig_parted_config_always_has_all_disabled() -> None:
    assert mig_parted_config({}) == {
        "version": "v1",
        "mig-configs": {DISABLED: [{"devices": "all", "mig-enabled": False}]},
    }


def test_mig_parted_config_renders_layouts_sorted() -> None:
    config = mig_parted_config(
        {"b-layout": {"3g.40gb": 1, "1g.10gb": 4}, "a-layout": {"7g.80gb": 1}, DISABLED: {}, "empty": {}}
    )
    assert list(config["mig-configs"]) == [DISABLED, "a-layout", "b-layout"]
    assert config["mig-configs"]["b-layout"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 4, "3g.40gb": 1}}
    ]
    assert list(config["mig-configs"]["b-layout"][0]["mig-devices"]) == ["1g.10gb", "3g.40gb"]
