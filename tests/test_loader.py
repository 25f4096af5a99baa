"""Reading config from the Pulumi runtime, and failing cleanly before anything is registered."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
import yaml

from components.loader import allowed_keys, raw_from_pulumi
from components.plan.offline import ROOT, run_program
from tests.conftest import fixture_config, qualified, raw_stack


def test_runtime_config_round_trip() -> None:
    pulumi.runtime.set_all_config({"gpuaas:teams": json.dumps([{"name": "a"}]), "gpuaas:x": "plain", "other:key": "1"})
    assert raw_from_pulumi() == {"teams": [{"name": "a"}], "x": "plain"}


def test_allowed_keys_cover_nested_models() -> None:
    keys = allowed_keys()
    assert "pkey" in keys[("teams", "*", "partition")]
    assert "nodePool" in keys[("teams", "*", "partition")]
    assert "vfsPerHca" in keys[("platform", "fabric")]


def test_bad_config_stops_the_program_before_any_resource() -> None:
    raw = raw_stack("onprem")
    raw["teams"][1]["partition"]["pkey"] = "0x8000"
    with pytest.raises(pulumi.RunError) as err:
        run_program("onprem", config=qualified(raw))
    assert "gpuaas:teams[1].partition.pkey: 0x8000 is outside" in str(err.value)


def test_plan_cli_prints_problems_without_traceback(tmp_path: Path) -> None:
    config = fixture_config("onprem")
    config["gpuaas:teams"][1]["partition"]["pkey"] = "0x8000"
    config["gpuaas:teams"][2]["partition"]["vfIndex"] = 6
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump({"config": config}))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "components.plan",
            "tests-onprem",  # no root stack's name: its kind is not compared (the root stacks are a team's own)
            "--stack-file",
            str(bad),
            "--out",
            str(tmp_path / "plan"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    head, *lines = proc.stderr.splitlines()[:3]
    assert head == "gpuaas: 2 problems in the stack config:"
    expected = [
        (
            "  gpuaas:teams[1].partition.pkey: 0x8000 is outside 0x0001..0x7ffe (0x7fff is the default partition)",
            "pkey:",
        ),
        (
            "  gpuaas:teams[2].partition.vfIndex: 6 is beyond the 6 VFs per HCA (allowed 0..5; raising "
            "platform.fabric.vfsPerHca adds VFs but re-creates every VF of every node: drain the RDMA nodes and set "
            "platform.fabric.reconfigure: true for that run)",
            "vfIndex: 6",
        ),
    ]
    text = bad.read_text().splitlines()
    for line, (message, key) in zip(lines, expected, strict=True):
        # Each problem ends with where its key is written in the file (line:column).
        found = re.fullmatch(re.escape(message) + r"  \(Pulumi\.bad\.yaml:(\d+):(\d+)\)", line)
        assert found, line
        assert key in text[int(found[1]) - 1], (key, text[int(found[1]) - 1])
    assert not (tmp_path / "plan").exists()
