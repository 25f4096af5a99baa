"""A cluster on a minor past its end of life gets its offline plan, with a loud warning; only the
deploy is refused (issue 35, item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.loader import parse_stack
from components.model.errors import ConfigError
from components.plan.diff import compare, render
from components.plan.offline import stack_config
from components.plan.writer import main
from tests.conftest import ROOT


def _stack(tmp_path: Path, version: str) -> Path:
    doc = yaml.safe_load((ROOT / "Pulumi.onprem.yaml").read_text())
    doc["config"]["gpuaas:platform"]["kubernetesVersion"] = version
    file = tmp_path / "Pulumi.onprem.yaml"
    file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return file


def test_a_minor_past_its_end_is_planned_with_a_warning(tmp_path: Path) -> None:
    file = _stack(tmp_path, "1.33.5")
    assert main(["onprem", "--stack-file", str(file), "--out", str(tmp_path / "p"), "--quiet"]) == 0
    summary = (tmp_path / "p" / "onprem" / "summary.txt").read_text().splitlines()
    warning = next(line for line in summary[:8] if line.startswith("WARNING: "))
    assert "PLAN ONLY: `pulumi up` refuses this stack: gpuaas:platform.kubernetesVersion: 1.33.5" in warning
    # The deploy (the program outside the offline plan) refuses it.
    with pytest.raises(ConfigError) as err:
        parse_stack(stack_config("onprem", file))
    assert "reached the end of its life" in str(err.value)


def test_a_supported_minor_has_no_warning(tmp_path: Path) -> None:
    file = _stack(tmp_path, "1.36.3")
    assert main(["onprem", "--stack-file", str(file), "--out", str(tmp_path / "p"), "--quiet"]) == 0
    assert "WARNING: " not in (tmp_path / "p" / "onprem" / "summary.txt").read_text()
    parse_stack(stack_config("onprem", file))


def test_the_warning_heads_the_plan_diff() -> None:

    head = {"summary.txt": "plan\nWARNING: PLAN ONLY: x\n", "a": "2\n"}
    report = render(compare({"a": "1\n"}, head), {"a": "1\n"}, head, "title").splitlines()
    assert report[:3] == ["title", "1 added, 1 changed, 0 removed", "WARNING: PLAN ONLY: x"]
    assert "WARNING" not in render(compare({"a": "1\n"}, {"a": "2\n"}), {"a": "1\n"}, {"a": "2\n"}, "t")
