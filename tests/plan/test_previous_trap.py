"""The ``PREVIOUS`` trap (issue 35, item 9): a guard's input is the stack's last *run*, never this
plan's own output.

``make plan PREVIOUS=plan/onprem/outputs.yaml`` read the file every plain ``make plan`` overwrites:
after one plain plan of a changed MIG layout, the change was compared with itself and passed, while
the tool said the guards had checked it. A ``--previous`` inside the plan folder being written is
refused, pointing at ``make diff BASE=main``; the summary says what the guards compared against.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.plan.diff import compare
from components.plan.writer import main
from tests.conftest import stack_path


def _plan(out: Path, *args: str) -> int:
    return main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(out), "--quiet", *args])


@pytest.mark.parametrize("spelling", ["direct", "dotted"])
def test_previous_inside_the_plan_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    out = tmp_path / "plan"
    assert _plan(out) == 0
    capsys.readouterr()
    own = out / "onprem" / "outputs.yaml" if spelling == "direct" else out / "onprem" / ".." / "onprem" / "outputs.yaml"
    assert _plan(out, "--previous", str(own)) == 2
    err = capsys.readouterr().err
    assert f"--previous {own}: is inside the plan folder this run writes ({out / 'onprem'})" in err
    assert "make diff BASE=main" in err and "Traceback" not in err
    assert (out / "onprem" / "summary.txt").is_file()  # refused before anything was replaced


def test_previous_outside_the_plan_folder_is_read_and_named_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan"
    assert _plan(out) == 0
    last = tmp_path / "last-run" / "outputs.yaml"
    last.parent.mkdir()
    shutil.copy(out / "onprem" / "outputs.yaml", last)  # the last run's outputs, kept aside
    assert _plan(out, "--previous", str(last)) == 0
    summary = (out / "onprem" / "summary.txt").read_text()
    assert (
        f"Day-2 guards (MIG layouts, fabric, resource model, Kubernetes version): checked against {last}\n" in summary
    )
    assert f"checked against {last}" in capsys.readouterr().err


def test_a_plan_without_previous_says_in_its_summary_that_nothing_was_checked(tmp_path: Path) -> None:
    assert _plan(tmp_path / "plan") == 0
    summary = (tmp_path / "plan" / "onprem" / "summary.txt").read_text().splitlines()
    line = next(x for x in summary if x.startswith("Day-2 guards"))
    assert line.startswith("Day-2 guards: NOT CHECKED (no --previous") and "make diff BASE=main" in line


def test_the_guards_line_is_no_change_in_a_plan_diff() -> None:
    base = {"summary.txt": "plan\nDay-2 guards: NOT CHECKED\nTeams\n"}
    head = {"summary.txt": "plan\nDay-2 guards (MIG layouts): checked against the base's outputs\nTeams\n"}
    assert compare(base, head).empty
    # The allowed twin: any other line of the summary is a change.
    assert compare(base, {"summary.txt": head["summary.txt"].replace("Teams", "Teams (1 more)")}).changed == [
        "summary.txt"
    ]
