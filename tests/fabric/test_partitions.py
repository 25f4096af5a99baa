"""partitions.conf, opensm.conf and the VF GUID plan, checked by a grammar checker of the tests' own.

:func:`osm_parse` is written from opensm(8) and linux-rdma/opensm ``osm_prtn_config.c`` independently
of :func:`components.fabric.partitions.validate_partitions_conf`, so a bug in the module's own validator
cannot hide a file that OpenSM would refuse.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from components.fabric.partitions import (
    DEFAULT_LINE,
    MAX_LINE,
    PartitionsConfError,
    opensm_conf,
    partitions_conf,
    team_partitions,
    validate_partitions_conf,
)
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.guids import GuidError, check_guids, node_guids, partition_members, vf_guid
from components.model.types import format_guid
from tests.conftest import raw_stack

#: fgets(line, sizeof(line) - 1) with char line[4096]: at most 4094 characters, newline included.
FGETS_LIMIT = 4094
PORT_KEYWORDS = {"ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF"}
MEMBERSHIPS = {"full", "limited", "both"}


@dataclass
class Partition:
    names: set[str] = field(default_factory=set)
    ports: dict[str, str] = field(default_factory=dict)
    definitions: list[set[str]] = field(default_factory=list)


def osm_parse(text: str) -> dict[int, Partition]:
    """Parse like OpenSM, failing on everything OpenSM calls a PARSE ERROR (and a bit more)."""
    parts: dict[int, Partition] = defaultdict(Partition)
    pending = ""
    for no, raw in enumerate(text.splitlines(keepends=True), 1):
        assert len(raw) <= FGETS_LIMIT, f"line {no} is {len(raw)} characters: fgets would cut it"
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        assert not pending, f"line {no}: a definition spans lines (gpuaas writes one per line)"
        assert line.endswith(";") and line.count(";") == 1, f"line {no}: one definition ending in ';'"
        body = line[:-1]
        assert body.count(":") == 1, f"line {no}: no partition definition found (missing ':')"
        header, members = body.split(":")
        head, *flags = [h.strip() for h in header.split(",")]
        name, eq, pkey_text = (s.strip() for s in head.partition("="))
        assert eq and re.fullmatch(r"0x[0-9a-fA-F]{1,4}", pkey_text), f"line {no}: explicit hex P_Key required"
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", name) and not name[0].isdigit(), f"line {no}: bad name {name!r}"
        pkey = int(pkey_text, 16) & 0x7FFF
        assert pkey, f"line {no}: P_Key 0"
        for flag in flags:
            key, _, val = flag.partition("=")
            assert key in {"indx0", "ipoib", "mtu", "rate", "sl", "scope", "defmember"}, f"line {no}: flag {flag!r}"
            if key in {"mtu", "rate"}:
                assert val.isdigit() and int(val) > 0, f"line {no}: {key} needs a value"
        p = parts[pkey]
        p.names.add(name)
        p.definitions.append(set(flags))
        for token in (t.strip() for t in members.split(",")):
            port, eq, membership = (s.strip() for s in token.partition("="))
            assert not eq or membership in MEMBERSHIPS, f"line {no}: membership {membership!r}"
            if port in PORT_KEYWORDS:
                key = port
            else:
                assert re.fullmatch(r"0x[0-9a-fA-F]{1,16}", port), f"line {no}: bad PortGUID {port!r}"
                guid = int(port, 16)
                assert 0 < guid < 0xFFFF_FFFF_FFFF_FFFF, f"line {no}: unusable PortGUID {port}"
                key = f"0x{guid:016x}"
            p.ports[key] = membership or "limited"
    assert parts, "no entries: OpenSM treats an empty file as an error"
    return dict(parts)


def _cfg(raw: dict[str, Any]) -> StackConfig:
    return parse_config(raw)


def fleet(nodes: int, hcas: int = 8, vfs: int = 8, teams: int = 6) -> StackConfig:
    raw = raw_stack("onprem")
    group = raw["platform"]["nodeGroups"][2]
    group["hcas"] = [f"mlx5_{i}" for i in range(hcas)]
    raw["platform"]["nodeGroups"] = [group]
    raw["platform"]["nodes"] = [{"name": f"n{i:05d}", "id": i + 1, "nodeGroup": group["name"]} for i in range(nodes)]
    raw["platform"]["fabric"].update({"vfsPerHca": vfs, "firmwareMaxVfs": max(16, vfs)})
    raw["teams"] = [
        {"name": f"team-{i}", "partition": {"pkey": i + 1, "vfIndex": i}, "quota": {"cpu": "1", "memory": "1Gi"}}
        for i in range(teams)
    ]
    return _cfg(raw)


def test_onprem_has_default_and_six_team_partitions(cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    text = partitions_conf(cfg)
    parts = osm_parse(text)
    assert sorted(parts) == [1, 2, 3, 4, 5, 6, 0x7FFF]
    assert DEFAULT_LINE in text.splitlines()
    assert parts[0x7FFF].ports == {"ALL_SWITCHES": "full", "SELF": "full"}
    names = {p.names.pop() for k, p in parts.items() if k != 0x7FFF}
    assert names == {t.name for t in cfg.teams}
    for pkey, part in parts.items():
        if pkey != 0x7FFF:
            assert len(part.ports) == 6 * 8 and set(part.ports.values()) == {"full"}
            assert all("indx0" in d for d in part.definitions)
    assert text.startswith("# partitions.conf generated by gpuaas")
    assert "do not edit" in text.splitlines()[0]


def test_team_line_format(cfg_of: Any) -> None:
    text = partitions_conf(cfg_of("onprem"))
    vision = next(line for line in text.splitlines() if line.startswith("vision="))
    assert vision.startswith("vision=0x0001, indx0, ipoib, mtu=5 : 0x0200000000001000=full, ")
    assert vision.endswith("=full;")


def test_no_ipoib_rate_unless_configured() -> None:
    """A group rate keeps a port whose link trained slower out of IPoIB (opensm(8)): opt-in only."""
    raw = raw_stack("onprem")
    assert "rate=" not in partitions_conf(_cfg(raw))
    raw["platform"]["fabric"]["opensm"]["ipoibRate"] = 21
    text = partitions_conf(_cfg(raw))
    vision = next(line for line in text.splitlines() if line.startswith("vision="))
    assert vision.startswith("vision=0x0001, indx0, ipoib, mtu=5, rate=21 : ")


def test_ipoib_flags_only_with_ipoib(cfg_of: Any) -> None:
    raw = raw_stack("onprem")
    raw["teams"][1]["partition"]["ipoib"] = False
    text = partitions_conf(_cfg(raw))
    language = next(line for line in text.splitlines() if line.startswith("language="))
    assert language.startswith("language=0x0002, indx0 : 0x")
    assert "mtu=" not in language and "ipoib" not in language


def test_guid_formula_and_members(cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    onprem = cfg.onprem
    scheme = onprem.fabric.guid_scheme
    assert vf_guid(scheme, 5, 3, 2) == 0x0200_0000_0000_0000 | 5 << 12 | 3 << 8 | 2
    members = partition_members(onprem, 2)
    assert len(members) == len(set(members)) == 48
    assert all(g & 0xFF == 2 for g in members)
    table = node_guids(onprem, onprem.nodes[0])
    assert list(table) == [f"mlx5_{i}" for i in range(8)] and all(len(v) == 6 for v in table.values())


def test_guid_errors(cfg_of: Any) -> None:
    scheme = cfg_of("onprem").onprem.fabric.guid_scheme
    with pytest.raises(GuidError, match="node id"):
        vf_guid(scheme, 1 << 16, 0, 0)
    with pytest.raises(GuidError, match="VF index"):
        vf_guid(scheme, 1, 0, 256)
    with pytest.raises(GuidError, match="twice"):
        check_guids([1, 2, 1])
    with pytest.raises(GuidError, match="usable"):
        check_guids([0])


def test_no_guid_in_two_partitions(cfg_of: Any) -> None:
    seen: dict[int, int] = {}
    for part in team_partitions(cfg_of("onprem")):
        for guid in part.members:
            assert seen.setdefault(guid, part.pkey) == part.pkey


def test_big_fleet_is_split_below_the_line_buffer() -> None:
    cfg = fleet(nodes=300, hcas=8, vfs=8, teams=8)
    text = partitions_conf(cfg)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= MAX_LINE < 4096
    parts = osm_parse(text)
    assert len(parts) == 9
    for pkey in range(1, 9):
        part = parts[pkey]
        assert len(part.ports) == 300 * 8, "every member survives the split exactly once"
        assert len(part.definitions) > 1, "2400 members cannot fit one line"
        assert part.names == {f"team-{pkey - 1}"}
        assert all("indx0" in d for d in part.definitions), "indx0 is per definition in osm_prtn_config.c"
        assert sum("ipoib" in d for d in part.definitions) == 1
    total = sum(line.count("=full") for line in lines if not line.startswith(("#", "Default")))
    assert total == 8 * 300 * 8


def test_split_is_exact_at_small_limits(cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    for limit in (120, 200, 1000):
        text = partitions_conf(cfg, max_line=limit)
        assert max(len(line) for line in text.splitlines() if not line.startswith("#")) <= limit
        assert osm_parse(text)[1].ports == osm_parse(partitions_conf(cfg))[1].ports


def test_no_team_partitions_still_has_default(cfg_of: Any) -> None:
    raw = raw_stack("onprem")
    for t in raw["teams"]:
        t.pop("partition")
        t["verify"] = False
        t["quota"]["rdma"] = 0
    text = partitions_conf(_cfg(raw))
    assert list(osm_parse(text)) == [0x7FFF]


GOOD = DEFAULT_LINE + "\nteam=0x0001, indx0 : 0x0200000000001000=full;\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no partition definitions"),
        ("# only a comment\n", "no partition definitions"),
        ("team=0x0001, indx0 : 0x0200000000001000=full;\n", "first definition must be the Default"),
        (GOOD + "bad=0x0002, indx0 0x0200000000001001=full;\n", "not 'Name=0xPKEY"),
        (GOOD + "bad=0x0002, indx0 : 0x0000000000000000=full;\n", "unusable GUID"),
        (GOOD + "bad=0x0002, indx0 : 0x02000000000010=full;\n", "bad port"),
        (GOOD + "bad=0x0002, indx0 : 0x0200000000001001;\n", "bad port"),
        (GOOD + "bad=0x0002, indx0 : 0x0200000000001000=full;\n", "is in partitions 0x0001 and 0x0002"),
        (GOOD + "other=0x0001, indx0 : 0x0200000000001001=full;\n", "named 'other' here and 'team' before"),
        (GOOD + "bad=0x0002, frob : 0x0200000000001001=full;\n", "unknown or malformed flag"),
        (GOOD + "bad=0x0002, indx0 : 0x0200000000001001=full\n", "not 'Name=0xPKEY"),
        (GOOD + "bad=0x8002, indx0 : 0x0200000000001001=full;\n", "outside 0x0001..0x7fff"),
        (
            GOOD + "x=0x0002 : " + ", ".join(f"0x{0x0300000000000000 + i:016x}=full" for i in range(200)) + ";\n",
            "more than",
        ),
    ],
)
def test_validator_refuses(text: str, problem: str) -> None:
    with pytest.raises(PartitionsConfError) as err:
        validate_partitions_conf(text)
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_validator_accepts_good() -> None:
    validate_partitions_conf(GOOD)
    assert osm_parse(GOOD)[1].ports == {format_guid(0x0200000000001000): "full"}


def test_opensm_conf(cfg_of: Any) -> None:
    text = opensm_conf(cfg_of("onprem"))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["virt_enabled 2", "routing_engine ftree", "partition_config_file /etc/opensm/partitions.conf"]
    assert "NVIDIA" in text and "upstream" in text
    with pytest.raises(ValueError, match="onprem"):
        opensm_conf(cfg_of("aks"))
    with pytest.raises(ValueError, match="onprem"):
        partitions_conf(cfg_of("aks"))


# --------------------------------------------------------------------------------------------
# The hosts' own ports: an infrastructure partition


PF_PORTS = ["0xb83fd20300a1b201", "b8:3f:d2:03:00:a1:b2:02"]


def _with_infra(**infra: Any) -> dict[str, Any]:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["infrastructure"] = {"pkey": "0x7ffe", "ports": PF_PORTS, **infra}
    return raw


def test_without_infrastructure_pfs_are_only_limited_default_members(cfg_of: Any) -> None:
    """osm_prtn.c: with a partitions.conf every port is a limited member of the default partition,
    and limited members cannot talk to each other: only switches and the SM are full."""
    parts = osm_parse(partitions_conf(cfg_of("onprem")))
    assert parts[0x7FFF].ports == {"ALL_SWITCHES": "full", "SELF": "full"}
    assert 0x7FFE not in parts


def test_infrastructure_partition_holds_the_pf_ports_at_index_0() -> None:
    cfg = _cfg(_with_infra())
    text = partitions_conf(cfg)
    parts = osm_parse(text)
    infra = parts[0x7FFE]
    assert infra.names == {"infra"}
    assert infra.ports == {"0xb83fd20300a1b201": "full", "0xb83fd20300a1b202": "full"}
    assert all("indx0" in d and "ipoib" in d for d in infra.definitions)
    others = {port for p in parts.values() if p is not infra for port in p.ports}
    assert not others & set(infra.ports), "no team VF is a host port"
    assert text.splitlines().index(next(ln for ln in text.splitlines() if ln.startswith("infra="))) == (
        text.splitlines().index(DEFAULT_LINE) + 1
    )


@pytest.mark.parametrize(
    ("infra", "path", "needle"),
    [
        ({"pkey": "0x0001"}, "gpuaas:platform.fabric.infrastructure.pkey", "already the partition of 'vision'"),
        ({"name": "vision"}, "gpuaas:platform.fabric.infrastructure.name", "also a team's name"),
        ({"ports": []}, "gpuaas:platform.fabric.infrastructure.ports", "is empty"),
        ({"ports": [PF_PORTS[0], PF_PORTS[0]]}, "gpuaas:platform.fabric.infrastructure.ports[1]", "listed twice"),
        # gpu-node-02 (id 2), HCA 3, VF 4 under the default scheme: a VF, even one no team uses
        (
            {"ports": ["0x0200000000002304"]},
            "gpuaas:platform.fabric.infrastructure.ports[0]",
            "VF 4 on HCA 3 of gpu-node-02",
        ),
    ],
    ids=["team-pkey", "team-name", "empty", "duplicate", "a-vf"],
)
def test_infrastructure_partition_refusals(infra: dict[str, Any], path: str, needle: str) -> None:
    from components.model.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config(_with_infra(**infra))
    issues = [i for i in err.value.issues if i.path == path]
    assert issues and needle in issues[0].message, err.value.issues


def test_a_guid_with_the_scheme_base_but_no_such_node_is_a_pf_port() -> None:
    """Only GUIDs the scheme really hands a VF are refused (node 99 does not exist)."""
    cfg = _cfg(_with_infra(ports=["0x0200000000063000"]))
    assert "0x0200000000063000=full" in partitions_conf(cfg)
