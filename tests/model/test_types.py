"""Domain types: one canonical value however the user spells it."""

from __future__ import annotations

import pytest

from components.model.types import colon_guid, format_guid, format_pkey, full_member_pkey, parse_guid, parse_pkey


@pytest.mark.parametrize("spelling", [1, "1", "0x1", "0x0001", "0X0001", "0x8001", 0x8001, " 0x1 "])
def test_pkey_spellings_are_one_partition(spelling: object) -> None:
    assert parse_pkey(spelling) == 1


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("0x8000", "0x8000 is outside 0x0001..0x7ffe (0x7fff is the default partition)"),
        (0, "outside 0x0001..0x7ffe"),
        ("0x7fff", "outside"),
        ("0xffff", "outside"),
        (0x10000, "16-bit"),
        (-1, "16-bit"),
        ("one", "not a P_Key"),
        (True, "not a P_Key"),
        (1.5, "not a P_Key"),
    ],
)
def test_bad_pkeys(bad: object, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_pkey(bad)


def test_pkey_forms() -> None:
    assert format_pkey(1) == "0x0001"
    assert full_member_pkey(1) == "0x8001"
    assert full_member_pkey(0x7FFE) == "0xfffe"


@pytest.mark.parametrize(
    "spelling", ["0x0200000000000001", "02:00:00:00:00:00:00:01", 0x0200000000000001, "200000000000001"]
)
def test_guid_spellings(spelling: object) -> None:
    assert parse_guid(spelling) == 0x0200000000000001


@pytest.mark.parametrize("bad", [0, "0x0", "ff:ff:ff:ff:ff:ff:ff:ff", "0x1ffffffffffffffff", "02:00:00", "zz", True])
def test_bad_guids(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_guid(bad)


def test_guid_forms() -> None:
    assert format_guid(0x0200000000000001) == "0x0200000000000001"
    assert colon_guid(0x0200000000000001) == "02:00:00:00:00:00:00:01"
