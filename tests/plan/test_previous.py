"""``--previous`` takes this stack's outputs only; a missing one only with ``--first-run`` (issue #21, item 13).

Each refused file beside the whole outputs of this stack, which the day-2 guard then reads (a MIG
layout change is refused against it): the guards are never off by accident.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.guards.gate import FORMAT, FORMAT_KEY, STACK_KEY
from components.plan.previous import read_previous
from components.plan.writer import main
from tests.conftest import last_outputs, stack_path

CHANGED_LAYOUT = {"h100-mig": "all-1g.10gb", "h100-shared": "all-disabled", "h100-full": "all-disabled"}


def _plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(tmp_path / "plan"), "--quiet", *args])
    return rc, capsys.readouterr().err


def _write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_whole_last_run_is_read_and_guards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = _write(tmp_path / "outputs.yaml", last_outputs("onprem"))
    assert _plan(tmp_path, capsys, "--previous", str(whole))[0] == 0
    changed = _write(tmp_path / "changed.yaml", last_outputs("onprem", migLayouts=CHANGED_LAYOUT))
    rc, err = _plan(tmp_path, capsys, "--previous", str(changed))
    assert rc == 2 and "gpuaas:platform.nodeGroups[0].mig: changes h100-mig from MIG layout 'all-1g.10gb'" in err


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "is empty, not the outputs.yaml of a plan"),
        ("- migLayouts\n", "is a list, not the outputs.yaml of a plan"),
        ({"migLayouts": CHANGED_LAYOUT}, f"has no {FORMAT_KEY}/{STACK_KEY}: not the outputs.yaml of a plan, or cut"),
        ("truncated", f"has no {FORMAT_KEY}/{STACK_KEY}"),
        ("aks", "holds the outputs of stack 'aks', not of stack 'onprem'"),
        ({**last_outputs("onprem"), FORMAT_KEY: FORMAT + 1}, f"is outputs format {FORMAT + 1}"),
        ("no-fabric", "is not whole (no fabricLayout)"),
        ("a: &a [*a]\n", "YAML: this anchor is used by an alias inside itself"),
    ],
    ids=["empty", "list", "not-outputs", "truncated", "other-stack", "format", "no-fabric", "cyclic"],
)
def test_anything_but_this_stacks_outputs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, why: str
) -> None:
    if content == "truncated":
        text = (Path(_plan_once(tmp_path, capsys)) / "outputs.yaml").read_text()
        content = "".join(text.splitlines(keepends=True)[:-1])  # cut at the last line
    elif content == "aks":
        content = last_outputs("aks")
    elif content == "no-fabric":
        content = {k: v for k, v in last_outputs("onprem").items() if k != "fabricLayout"}
    prev = _write(tmp_path / "outputs.yaml", content)
    rc, err = _plan(tmp_path, capsys, "--previous", str(prev))
    assert rc == 2 and f"--previous {prev}" in err and why in err, err
    assert "Traceback" not in err


def _plan_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(tmp_path / "base"), "--quiet"]) == 0
    capsys.readouterr()
    return str(tmp_path / "base" / "onprem")


def test_the_stamp_is_the_last_lines_of_the_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = (Path(_plan_once(tmp_path, capsys)) / "outputs.yaml").read_text().splitlines()
    assert lines[-2:] == [f"{STACK_KEY}: onprem", f"{FORMAT_KEY}: {FORMAT}"]


def test_a_missing_file_is_a_first_run_only_when_the_run_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-outputs.yaml"
    rc, err = _plan(tmp_path, capsys, "--previous", str(missing))
    assert rc == 2 and "no such file" in err and "--first-run" in err
    rc, err = _plan(tmp_path, capsys, "--previous", str(missing), "--first-run")
    assert rc == 0 and "Day-2 guards: first run (--first-run)" in err
    # --first-run excuses a missing file only: a file that is there is still checked
    bad = _write(tmp_path / "bad.yaml", {"migLayouts": {}})
    assert _plan(tmp_path, capsys, "--previous", str(bad), "--first-run")[0] == 2


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "."])
def test_a_previous_that_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], special: str
) -> None:
    rc, err = _plan(tmp_path, capsys, "--previous", special)
    assert rc == 2 and "is not a regular file" in err


def test_outputs_planned_here_by_older_code_are_this_stacks(tmp_path: Path) -> None:
    """``make diff`` plans the base with the base's own code: before the stamp, its outputs had none."""
    older = {k: v for k, v in last_outputs("onprem").items() if k not in (STACK_KEY, FORMAT_KEY)}
    prev = _write(tmp_path / "outputs.yaml", older)
    read = read_previous(prev, "onprem", planned_as="onprem")
    assert read is not None and read[STACK_KEY] == "onprem"
    with pytest.raises(Exception, match="has no outputsFormat"):
        read_previous(prev, "onprem")
