"""Disruptive changes (MIG re-partition, VF re-creation, partition moves) and the guards' warnings
head the plan summary, and with it the plan diff and its pull-request comment (issue 35, item 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.guards import fabric, mig
from components.guards.disruptions import DISRUPTIVE, disruptions, guard_warnings
from components.loader import parse_config
from components.plan.diff import compare, read_tree, render
from components.plan.writer import main as plan_main
from tests.conftest import last_outputs, raw_stack, stack_path

MIG_GROUP = 0  # h100-mig in tests/stacks/onprem.yaml, layout 1x4g.40gb-3x1g.10gb on gpu-node-05


def _last(**outputs: Any) -> dict[str, Any]:
    """The tests' onprem stack's last outputs, with some replaced."""
    return last_outputs("onprem", **outputs)


def _onprem() -> dict[str, Any]:
    return raw_stack("onprem")


def test_an_acknowledged_mig_change_is_named_with_its_nodes_and_how_to_drain() -> None:
    cfg = parse_config(_onprem())
    last = _last(**{mig.OUTPUT: {**mig.mig_layouts(cfg), "h100-mig": "all-1g.10gb"}})
    (line,) = disruptions(cfg, last)
    assert line.startswith(f"{DISRUPTIVE}MIG re-partition of h100-mig from 'all-1g.10gb' to '1x4g.40gb-3x1g.10gb'")
    assert "gpu-node-05" in line and "kubectl drain -l gpuaas.io/node-group=h100-mig" in line


def test_unchanged_layouts_and_a_first_run_are_not_disruptive() -> None:
    cfg = parse_config(_onprem())
    assert disruptions(cfg, _last()) == []
    assert disruptions(cfg, None) == []
    # The same geometry spelled otherwise relabels only: MIG Manager re-partitions nothing.
    raw = _onprem()
    raw["platform"]["nodeGroups"][MIG_GROUP]["mig"] = {"profiles": {"4g.40gb": 1, "1g.10gb": 3}}
    assert disruptions(parse_config(raw), _last()) == []


def test_a_vf_count_change_is_a_vf_re_creation_on_every_node() -> None:
    raw = _onprem()
    cfg = parse_config(raw)
    was = fabric.fabric_layout(cfg)
    last = _last(**{fabric.OUTPUT: {**was, "vfsPerHca": str(int(was["vfsPerHca"]) + 2)}})
    (line,) = disruptions(cfg, last)
    assert line.startswith(f"{DISRUPTIVE}VF re-creation: vfsPerHca ")
    assert f"all {len(cfg.onprem.nodes)} nodes" in line  # type: ignore[union-attr]


def test_a_moved_partition_names_the_team() -> None:
    cfg = parse_config(_onprem())
    team = next(t for t in cfg.teams if t.partition is not None)
    was = fabric.fabric_layout(cfg)
    last = _last(**{fabric.OUTPUT: {**was, f"teams.{team.name}.pkey": "0x0042"}})
    (line,) = disruptions(cfg, last)
    assert line.startswith(f"{DISRUPTIVE}partition move: {team.name} (P_Key 0x0042 -> ")


def test_a_reconfigure_left_on_is_a_warning_of_the_plan_not_only_of_the_log() -> None:
    raw = _onprem()
    raw["platform"]["nodeGroups"][MIG_GROUP]["mig"]["reconfigure"] = True
    (warning,) = guard_warnings(parse_config(raw), _last())
    assert "mig.reconfigure is true but h100-mig keeps layout" in warning
    assert guard_warnings(parse_config(_onprem()), _last()) == []


def _stack_file(tmp_path: Path, name: str, edit: Any) -> Path:
    doc = yaml.safe_load(stack_path("onprem").read_text())
    edit(doc["config"])
    file = tmp_path / f"Pulumi.{name}.yaml"
    file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return file


def _mig_change(config: dict[str, Any]) -> None:
    config["gpuaas:platform"]["nodeGroups"][0]["mig"] = {"layout": "all-1g.10gb", "reconfigure": True}
    config["gpuaas:platform"]["nodeGroups"][2]["mig"] = {"reconfigure": True}  # left on: nothing changes there
    for team in config["gpuaas:teams"]:
        if "mig" in team["quota"]:
            team["quota"]["mig"] = {"1g.10gb": 4}


def test_the_plan_diff_opens_with_the_re_partition_and_the_flag_left_on(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    assert plan_main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(base), "--quiet"]) == 0
    args = ["--stack-file", str(_stack_file(tmp_path, "mig", _mig_change)), "--out", str(head), "--quiet"]
    assert plan_main(["onprem", *args, "--previous", str(base / "onprem" / "outputs.yaml")]) == 0
    b, h = read_tree(base / "onprem"), read_tree(head / "onprem")
    report = render(compare(b, h), b, h, "title").splitlines()
    assert report[2].startswith("WARNING: DISRUPTIVE: MIG re-partition of h100-mig")
    assert report[3].startswith("WARNING: gpuaas:platform.nodeGroups[2].mig.reconfigure is true")
    # Its twin: the same change planned against itself disrupts nothing and warns of nothing but the flags.
    again = tmp_path / "again"
    args[3] = str(again)
    assert plan_main(["onprem", *args, "--previous", str(head / "onprem" / "outputs.yaml")]) == 0
    assert DISRUPTIVE not in (again / "onprem" / "summary.txt").read_text()
