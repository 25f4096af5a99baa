"""The config reference links each key to the cross-field rules that name it (issue 36)."""

from __future__ import annotations

from components.loader import parse_config
from components.model.errors import ConfigError
from components.plan import reference, reference_docs, rule_index
from tests.conftest import raw_stack


def _row(where: str, key: str) -> str:
    """The reference's table row of ``key`` under the section ``where``."""
    text = reference.render()
    section = text.split(f"#### `{where}` — ", 1)[1].split("\n#### ", 1)[0]
    return next(line for line in section.splitlines() if line.startswith(f"| `{key}` |"))


def test_a_key_a_rule_refuses_links_that_rule() -> None:
    # The rule exists: a VF index beyond vfsPerHca is refused by the fabric rules, naming the key.
    raw = raw_stack("onprem")
    raw["teams"][0]["partition"]["vfIndex"] = 6
    try:
        parse_config(raw)
    except ConfigError as err:
        assert "gpuaas:teams[0].partition.vfIndex" in err.render()
    else:
        raise AssertionError("vfIndex 6 of 6 VFs was accepted")
    row = _row("teams[].partition (OnPremPartition)", "vfIndex")
    assert row.endswith("| [fabric](../concepts/config-checks.md#fabric-rules) |")
    assert "[fabric]" in _row("platform (OnPremPlatform).fabric", "vfsPerHca")


def test_a_key_no_rule_names_says_so() -> None:
    # Its twin: a pass mark only the model bounds (more than 0, at most 1) names no rule area.
    assert _row("verification", "ibWriteBwMinFraction").endswith("| — |")
    assert rule_index.areas_naming("", "teams") == []  # a top-level key: its sub-keys carry the rules


def test_a_docstring_mention_or_a_plain_word_does_not_count() -> None:
    source = '''
"""Rules of ``platform.fabric.guidScheme``: a docstring describes, it refuses nothing."""
def rule(where):
    """About ``teams[].quota.rdma``."""
    yield Issue(f"gpuaas:teams[{where}].partition.pkey", "too big")
    yield config_key(where, "vfIndex")
    yield config_key(where, "name")
'''
    pairs, words = rule_index.mentions(source)
    assert ("partition", "pkey") in pairs  # the f-string's text after its placeholder
    assert ("fabric", "guidScheme") not in pairs and ("quota", "rdma") not in pairs
    assert words == {"vfIndex"}  # "name" is every area's word


def test_every_area_has_its_section_on_the_rules_page() -> None:
    page = (reference_docs.DOCS / "concepts" / "config-checks.md").read_text()
    for area in rule_index.AREAS:
        assert f"#### {area} rules\n" in page, area
