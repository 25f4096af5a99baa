"""The built-in plan comparison: added/changed/removed per team and per component, then the diffs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.plan.diff import compare, main, read_tree, render
from components.plan.index import INDEX
from components.plan.offline import ROOT
from components.plan.writer import write_plan
from tests.conftest import fixture_config, stack_path


def _index(entries: dict[str, dict[str, str]]) -> str:
    return yaml.safe_dump(entries)


TEAM_A = {"component": "teams", "team": "a"}


def test_compare_groups_by_team_then_component() -> None:
    base = {
        INDEX: _index(
            {"k8s/a/Quota.yaml": {"component": "teams", "team": "a"}, "k8s/x/Gone.yaml": {"component": "opensm"}}
        ),
        "k8s/a/Quota.yaml": "gpus: 1\n",
        "k8s/x/Gone.yaml": "x\n",
        "same.yaml": "s\n",
    }
    head = {
        INDEX: _index({"k8s/a/Quota.yaml": TEAM_A, "k8s/b/New.yaml": {"component": "teams", "team": "b"}}),
        "k8s/a/Quota.yaml": "gpus: 2\n",
        "k8s/b/New.yaml": "new\n",
        "same.yaml": "s\n",
    }
    diff = compare(base, head)
    assert (diff.added, diff.changed, diff.removed) == (["k8s/b/New.yaml"], ["k8s/a/Quota.yaml"], ["k8s/x/Gone.yaml"])
    report = render(diff, base, head, "title")
    head_lines = report.split("\n--- ", 1)[0].splitlines()
    assert head_lines == [
        "title",
        "1 added, 1 changed, 1 removed",
        "",
        "team a: 0 added, 1 changed, 0 removed",
        "  ~ k8s/a/Quota.yaml  (teams)",
        "",
        "team b: 1 added, 0 changed, 0 removed",
        "  + k8s/b/New.yaml  (teams)",
        "",
        "component opensm: 0 added, 0 changed, 1 removed",
        "  - k8s/x/Gone.yaml",
    ]
    assert "--- base/k8s/a/Quota.yaml\n+++ head/k8s/a/Quota.yaml\n@@ -1 +1 @@\n-gpus: 1\n+gpus: 2\n" in report
    assert "--- /dev/null\n+++ head/k8s/b/New.yaml\n" in report
    assert "--- base/k8s/x/Gone.yaml\n+++ /dev/null\n" in report


def test_identical_plans_report_no_change() -> None:
    tree = {INDEX: "{}\n", "a.yaml": "a\n"}
    diff = compare(tree, dict(tree))
    assert diff.empty
    assert render(diff, tree, tree, "t").splitlines() == [
        "t",
        "0 added, 0 changed, 0 removed",
        "No change to the offline plan.",
    ]


def test_adding_a_team_shows_up_under_that_team(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two real plans: the base stack and the same stack with a team more (folders as --base/--head)."""
    write_plan("onprem", tmp_path / "base", stack_file=stack_path("onprem"))
    config = fixture_config("onprem")
    # No GPUs to guarantee: the checked-in fleet's are all guaranteed to its teams (elastic quotas).
    config["gpuaas:teams"].append({"name": "robotics", "groups": ["oidc:team-robotics"], "quota": {"cpu": "8"}})
    candidate = tmp_path / "Pulumi.candidate.yaml"
    candidate.write_text(yaml.safe_dump({"config": config}))
    write_plan("onprem", tmp_path / "head", candidate)
    out = tmp_path / "diff"
    rc = main(
        ["--stack", "onprem", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert rc == 1
    assert (out / "plan.diff").read_text() == printed
    sections = {
        block.splitlines()[0]: block for block in printed.split("\n\n") if block.startswith(("team ", "component "))
    }
    [robotics] = [block for head, block in sections.items() if head.startswith("team robotics: ")]
    assert ", 0 changed, 0 removed" in robotics.splitlines()[0]
    assert "  + k8s/_cluster/Namespace-robotics.yaml  (teams)" in robotics
    assert "  + k8s/robotics/ResourceQuota-gpuaas-team-quota.yaml  (teams)" in robotics
    assert not [s for s in sections if s.startswith("team ") and "robotics" not in s]  # other teams untouched
    assert "+++ head/k8s/robotics/ResourceQuota-gpuaas-team-quota.yaml" in printed


def test_a_git_ref_is_planned_with_its_own_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if (
        shutil.which("git") is None
        or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode
    ):
        pytest.skip("needs git and a git checkout")
    write_plan("onprem", tmp_path / "head", stack_file=stack_path("onprem"))
    out = tmp_path / "diff"
    rc = main(["--stack", "onprem", "--base", "HEAD", "--head", str(tmp_path / "head"), "--out", str(out), "--quiet"])
    assert rc in (0, 1), capsys.readouterr().err
    assert (out / "base" / "onprem" / "summary.txt").is_file()
    assert read_tree(out / "base" / "onprem")["summary.txt"].startswith("gpuaas offline plan — stack onprem")


def test_a_bad_base_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--stack", "onprem", "--base", "no-such-ref-xyz", "--head", str(tmp_path), "--out", str(tmp_path / "d")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "'no-such-ref-xyz' is neither a plan folder nor a git ref" in err and "Traceback" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--stack", "onprem", "--base", str(empty), "--out", str(tmp_path / "d")]) == 2
    assert "holds no plan of stack onprem" in capsys.readouterr().err
    assert main(["--stack", "..", "--base", str(empty), "--out", str(tmp_path / "d")]) == 2
    assert "is not a stack name" in capsys.readouterr().err


def test_adding_a_partitioned_team_changes_no_other_team_and_shows_its_partition_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 11: the base is the stack without speech, the head the stack as it is."""
    config = fixture_config("onprem")
    config["gpuaas:teams"] = [t for t in config["gpuaas:teams"] if t["name"] != "speech"]
    without = tmp_path / "Pulumi.without.yaml"
    without.write_text(yaml.safe_dump({"config": config}))
    write_plan("onprem", tmp_path / "base", stack_file=without)
    write_plan("onprem", tmp_path / "head", stack_file=stack_path("onprem"))
    out = tmp_path / "diff"
    rc = main(
        ["--stack", "onprem", "--base", str(tmp_path / "base"), "--head", str(tmp_path / "head"), "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert rc == 1
    teams = [line for line in printed.splitlines() if line.startswith("team ")]
    # vision (the verifying team) gains its probe into speech; nothing of it changes, no probe moves.
    assert [t.split(":")[0] for t in teams] == ["team speech", "team vision"]
    assert teams[0].endswith(" added, 0 changed, 0 removed")
    assert teams[1] == "team vision: 1 added, 0 changed, 0 removed"
    assert "  + k8s/vision/Job-isolation-vision-to-speech.yaml  (verification)" in printed
    # speech's partitions.conf line (its GUIDs on every HCA of every node) in full once, where the
    # file an operator loads has it; the ConfigMap and the stack output point there.
    line = next(
        x for x in (tmp_path / "head/onprem/opensm/partitions.conf").read_text().splitlines() if x.startswith("speech=")
    )
    assert len(line) > 200
    assert printed.count(line) == 1
    assert f"+{line}\n" in printed.split("+++ head/opensm/partitions.conf")[1]
    pointer = f"… the same {len(line)}-character line as in opensm/partitions.conf (shown there once)"
    assert printed.count(pointer) == 2


def test_a_long_line_in_one_file_only_is_shown_in_full() -> None:
    long = "x" * 300
    base = {"a.conf": "short\n", "b.yaml": "k: |\n  short\n"}
    head = {"a.conf": f"{long}\n", "b.yaml": "k: |\n  other\n"}
    report = render(compare(base, head), base, head, "t")
    assert f"+{long}\n" in report and "the same" not in report
    assert "+  other\n" in report  # a short line is shown wherever it changes
