"""Values given to make, and to the plan tools, are data, never commands (issue #21, items 13 and 15).

A pull request controls some of them (a base ref, a stack name in a matrix): each case here would
have run ``touch`` before the fix (Make variables reached the shell unquoted, a ref reached ``git
archive`` as an option). Each refusal beside its allowed twin.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from components.model.errors import ConfigError
from components.plan.diff import main as diff_main
from components.plan.diff import plan_ref
from components.plan.stacks import stack_names
from components.plan.writer import main as plan_main
from tests.conftest import ROOT, stack_path

OWN = "tests-onprem"


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.fail("make is not installed: `make plan` is one of the two set-up commands")
    # -o: the virtualenv is there already (this suite runs in it); make must not reinstall it.
    # The tests' own stack under a name no checkout's Pulumi.<stack>.yaml is expected to have: the
    # root stacks are a team's own (tests/conftest.py); a later STACK= or STACK_FILE= in args wins.
    return subprocess.run(
        ["make", "-s", "-o", ".venv/.runtime", f"STACK={OWN}", f"STACK_FILE={stack_path('onprem')}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize(
    ("target", "variable", "value"),
    [
        ("plan", "STACK", "onprem; touch {x}"),
        ("plan", "STACK", "$(shell touch {x})"),
        ("plan", "PREVIOUS", "$(touch {x})"),
        ("plan", "PREVIOUS", "`touch {x}`"),
        ("diff", "BASE", "$(touch {x})"),
        ("diff", "BASE", "$(shell touch {x})"),
        ("diff", "BASE", "--output={x}"),
        ("diff", "STACK", "onprem' || touch {x} || '"),
    ],
    ids=["stack-semicolon", "stack-make-shell", "previous-subshell", "previous-backticks", "base-subshell",
         "base-make-shell", "base-option", "stack-quote"],
)  # fmt: skip
def test_a_make_variable_never_runs_a_command(tmp_path: Path, target: str, variable: str, value: str) -> None:
    x = tmp_path / "X"
    result = _make(target, f"{variable}={value.format(x=x)}", f"DIFF_OUT={tmp_path / 'diff'}")
    assert not x.exists(), f"{variable}={value!r} ran a command"
    assert result.returncode == 2, result.stdout + result.stderr  # the tool's own status, visible
    assert "gpuaas: 1 problem" in result.stderr and "Traceback" not in result.stderr


def test_make_diff_keeps_the_tools_status(tmp_path: Path) -> None:
    """Item 15: a problem is the tool's status 2 (it used to read `Error 1`), changes are no error."""
    bad = _make("diff", "STACK=no-such-stack", f"DIFF_OUT={tmp_path / 'bad'}")
    assert bad.returncode == 2 and "make diff: components.plandiff exited with status 2" in bad.stderr
    assert "Error 2" in bad.stderr
    # the twin: a real base plan folder, and the head planned from the same file (no change: status 0)
    assert plan_main([OWN, "--stack-file", str(stack_path("onprem")), "--out", str(tmp_path / "base"), "--quiet"]) == 0
    good = _make("diff", f"BASE={tmp_path / 'base'}", f"DIFF_OUT={tmp_path / 'diff'}")
    assert good.returncode == 0, good.stderr
    assert "No change to the offline plan." in (tmp_path / "diff" / "plan.diff").read_text()


def test_a_base_that_looks_like_an_option_never_reaches_git(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "truncated-by-git"
    target.write_text("keep me\n")
    out = tmp_path / "d"
    assert (
        diff_main(["--stack", "onprem", f"--base=--output={target}", "--head", str(tmp_path), "--out", str(out)]) == 2
    )
    assert target.read_text() == "keep me\n"
    assert "is neither a plan folder nor a git ref" in capsys.readouterr().err
    # a ref git does not verify (an option after `--end-of-options` would be one) is refused too
    assert diff_main(["--stack", "onprem", "--base=HEAD~100000", "--out", str(out)]) == 2
    assert "git rev-parse --verify refuses it" in capsys.readouterr().err


def test_a_base_without_the_stack_needs_first_run(tmp_path: Path) -> None:
    """A base commit without Pulumi.<stack>.yaml: refused, unless the change says it adds the stack."""
    with pytest.raises(ConfigError, match=r"HEAD has no Pulumi\.brand-new\.yaml: if this change adds stack"):
        plan_ref("HEAD", "brand-new", tmp_path / "base")
    assert plan_ref("HEAD", "brand-new", tmp_path / "base", first_run=True) is None
    # the twin: a stack the base has is planned with the base's own code
    name = stack_names()[0]  # a stack the checkout (and so HEAD) has, whatever it is
    assert plan_ref("HEAD", name, tmp_path / "base") == tmp_path / "base" / name
