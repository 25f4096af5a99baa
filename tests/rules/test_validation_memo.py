"""Validation at fleet scale (issue 37): duplicates found in one pass, and a config validated once per plan.

The plan validates a stack before the program runs, and the program validates it again: the loader
keeps the last config's undated result by content (components/loader.py ``_VALIDATED``), and judges
the date (the version rule) on every call.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from components import loader
from components.loader import parse_config
from components.model.errors import ConfigError
from components.rules import undated
from tests.conftest import raw_stack


def _issues(raw: dict[str, Any], today: datetime.date | None = None) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(raw) if today is None else parse_config(raw, today)
    return [str(i) for i in err.value.issues]


def _with_nodes(names: list[str]) -> tuple[dict[str, Any], int]:
    """The onprem stack with nodes more, named ``names``; and the index of the first of them."""
    raw = raw_stack("onprem")
    nodes = raw["platform"]["nodes"]
    first, top = len(nodes), max(n["id"] for n in nodes)
    nodes += [{**nodes[0], "name": n, "id": top + 1 + i} for i, n in enumerate(names)]
    return raw, first


def test_every_repeat_of_a_node_name_is_refused_and_its_first_is_not() -> None:
    raw, at = _with_nodes(["a", "b", "a", "c", "a"])
    dups = {i.split(":")[1] for i in _issues(raw) if "duplicate node" in i}
    assert dups == {f"platform.nodes[{at + 2}].name", f"platform.nodes[{at + 4}].name"}


def test_distinct_node_names_pass() -> None:
    assert parse_config(_with_nodes(["a", "b", "c", "d", "e"])[0]).platform.kind == "onprem"


def test_a_repeated_id_names_the_node_that_has_it_first() -> None:
    raw, at = _with_nodes(["a", "b", "c"])
    nodes = raw["platform"]["nodes"]
    nodes[at + 2]["id"] = nodes[at + 1]["id"]
    assert [i for i in _issues(raw) if "already the id" in i] == [
        f"gpuaas:platform.nodes[{at + 2}].id: {nodes[at + 1]['id']} is already the id of 'b'; node ids must be "
        "unique (they seed VF GUIDs)"
    ]


def test_the_same_content_is_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counted(cfg: Any) -> Any:
        calls.append(1)
        return undated(cfg)

    monkeypatch.setattr(loader, "undated", counted)
    loader._VALIDATED.clear()
    first = parse_config(raw_stack("onprem"))
    again = parse_config(raw_stack("onprem"))  # a fresh dict of the same content
    assert again is first and len(calls) == 1
    other = parse_config(_with_nodes(["one-more"])[0])  # other content: validated anew
    assert other is not first and len(calls) == 2


def test_a_remembered_config_is_still_judged_by_the_day() -> None:
    loader._VALIDATED.clear()
    raw = raw_stack("onprem")
    parse_config(raw)  # today: the reviewed date, supported
    far = datetime.date(2100, 1, 1)
    assert any(i.startswith("gpuaas:platform.kubernetesVersion:") for i in _issues(raw, far))
    assert parse_config(raw).platform.kind == "onprem"  # and the allowed twin, from the memo again
