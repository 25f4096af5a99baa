"""Every command block the docs mark runs, from the page itself, against the stacks the tests own.

A page's blocks run in order in a fresh copy of the repository's files; ``<!-- docs-test: file
NAME -->`` writes the YAML block after it to NAME, ``<!-- docs-test: run -->`` runs the sh block
after it with ``bash -euo pipefail``. The copy's ``Pulumi.onprem.yaml`` and ``Pulumi.aks.yaml`` are
the tests' own stacks where they exist (:func:`tests.docs.pages.test_stack_file`), so a team that
makes the root stacks its own still passes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from components.plan.offline import ROOT
from tests.docs.pages import Block, marked_blocks, pages, test_stack_file

PAGES = [p for p in pages() if marked_blocks(p)]


def sandbox(tmp_path: Path) -> Path:
    """The repository's files (tracked and untracked, not ignored), its virtualenv linked."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    root = tmp_path / "repo"
    for name in filter(None, listed.split("\0")):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)  # mtimes kept: make's stamps judge them as in the clone
    (root / ".venv").symlink_to((ROOT / ".venv").resolve())
    for stack in ("onprem", "aks"):
        shutil.copy2(test_stack_file(stack), root / f"Pulumi.{stack}.yaml")
    return root


def run(block: Block, root: Path) -> None:
    if block.action == "file":
        (root / block.argument).write_text(block.body)
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "GPUAAS_TODAY"))}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.body],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.where()}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def test_the_readme_marks_its_first_plan() -> None:
    """The five-minute path is run, not only shown: its file and its commands are marked."""
    actions = [(b.action, b.argument) for b in marked_blocks(ROOT / "README.md")]
    assert actions == [("file", "my-cluster.yaml"), ("run", "")]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_pages_commands_run(page: Path, tmp_path: Path) -> None:
    root = sandbox(tmp_path)
    for block in marked_blocks(page):
        run(block, root)
