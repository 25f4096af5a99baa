"""A last-run record that cannot be what this stack wrote is refused (issue 35, item 19).

The day-2 guards compare against what they find: ``fabricLayout: {}`` let a ``vfsPerHca`` change
through without ``reconfigure``, and an AKS stack's outputs relabelled as this stack's carried no
fabric at all; both planned silently. Each refusal beside the record as the tool wrote it, on which
the guard then stops the same change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.guards.gate import STACK_KEY
from components.plan.writer import main
from tests.conftest import ROOT, last_outputs


def _stack_with_vfs(tmp_path: Path, vfs: int) -> Path:
    doc = yaml.safe_load((ROOT / "Pulumi.onprem.yaml").read_text())
    doc["config"]["gpuaas:platform"].setdefault("fabric", {})["vfsPerHca"] = vfs
    file = tmp_path / "Pulumi.onprem.yaml"
    file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return file


def _plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], previous: dict[str, Any], vfs: int) -> tuple[int, str]:
    prev = tmp_path / "outputs.yaml"
    prev.write_text(yaml.safe_dump(previous, sort_keys=False))
    stack = _stack_with_vfs(tmp_path, vfs)
    rc = main(["onprem", "--stack-file", str(stack), "--out", str(tmp_path / "p"), "--quiet", "--previous", str(prev)])
    return rc, capsys.readouterr().err


def _vfs_now() -> int:
    return int(last_outputs("onprem")["fabricLayout"]["vfsPerHca"])


def _aks_as_onprem(**extra: Any) -> dict[str, Any]:
    return {**last_outputs("aks"), STACK_KEY: "onprem", **extra}


@pytest.mark.parametrize(
    ("previous", "why"),
    [
        (lambda: last_outputs("onprem", fabricLayout={}), "fabricLayout has no vfsPerHca, guidScheme"),
        (
            lambda: last_outputs("onprem", fabricLayout={**last_outputs("onprem")["fabricLayout"], "vfsPerHca": "six"}),
            "fabricLayout.vfsPerHca is 'six', not a count",
        ),
        (lambda: last_outputs("onprem", migLayouts={"h100-mig": 7}), "migLayouts is not a map of strings"),
        (_aks_as_onprem, "platform is 'aks', but this stack is 'onprem'"),
        (
            lambda: _aks_as_onprem(platform="onprem", fabricLayout={}, migNodeLayouts={}),
            "fabricLayout has no vfsPerHca, guidScheme",
        ),
    ],
    ids=["empty-fabric", "vfs-not-a-count", "mig-not-strings", "aks-relabelled", "aks-relabelled-as-onprem"],
)
def test_a_record_this_stack_cannot_have_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], previous: Any, why: str
) -> None:
    rc, err = _plan(tmp_path, capsys, previous(), _vfs_now() + 2)  # a vfsPerHca change, no reconfigure
    assert rc == 2 and "cannot be what a run of this stack wrote" in err and why in err, err
    assert "Traceback" not in err


def test_the_record_as_written_stops_the_same_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _plan(tmp_path, capsys, last_outputs("onprem"), _vfs_now() + 2)
    assert rc == 2 and f"gpuaas:platform.fabric.vfsPerHca: changes from '{_vfs_now()}' to '{_vfs_now() + 2}'" in err


def test_the_record_as_written_passes_an_unchanged_fabric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _plan(tmp_path, capsys, last_outputs("onprem"), _vfs_now())
    assert rc == 0, err
