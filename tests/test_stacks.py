"""The stacks: the root ``Pulumi.<stack>.yaml`` are a platform team's own, the tests' are theirs.

Every root stack, whatever it holds, parses, passes every rule and plans (the only tests that read
the root stacks, marked ``root_stacks``); the tests' own stacks (``tests/stacks``) build under mocks
and plan deterministically; and a team's own clusters put in place of the samples, with a third
beside them, are what these tests, ``make plans`` and the pull-request workflow's matrix plan.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pulumi
import pytest

from components.loader import parse_stack, read_stack_file
from components.plan.offline import ROOT, Run, run_program, stack_config
from components.plan.stacks import github_matrix, stack_names
from components.plan.writer import plan_files, write_plan
from e2e import upstream
from tests.conftest import STACKS_DIR, fixture_config, stack_path

#: Every stack of this checkout: a team's own, the samples until it replaces them.
ROOT_STACKS = stack_names()


@pytest.mark.root_stacks
@pytest.mark.parametrize("name", ROOT_STACKS)
def test_every_root_stack_parses_passes_the_rules_and_plans(name: str, tmp_path: Path) -> None:
    """As ``make plan STACK=<name>`` plans it: by its name, from ``Pulumi.<name>.yaml``."""
    config = read_stack_file(ROOT / f"Pulumi.{name}.yaml")
    cfg = parse_stack(config)
    run, summary = write_plan(name, tmp_path)
    assert run.outputs["platform"] == cfg.platform.kind
    assert [r for r in run.records if r.type == "gpuaas:index:Platform"]
    assert summary.startswith(f"gpuaas offline plan — stack {name}")
    assert (tmp_path / name / "outputs.yaml").is_file()


@pytest.mark.root_stacks
def test_a_root_stack_is_read_by_name_only_where_marked() -> None:
    """The twin of the refusal below: the marked tests read the root stacks by their names."""
    for name in ROOT_STACKS:
        assert stack_config(name) == read_stack_file(ROOT / f"Pulumi.{name}.yaml")


def test_other_tests_cannot_read_a_root_stack_by_name() -> None:
    with pytest.raises(AssertionError, match=r"plans its own tests/stacks/onprem\.yaml"):
        stack_config("onprem")
    with pytest.raises(AssertionError, match=r"root Pulumi\.aks\.yaml"):
        run_program("aks")
    assert stack_config("onprem", stack_path("onprem")) == fixture_config("onprem")


@pytest.mark.parametrize(
    ("files", "names"),
    [
        (["Pulumi.yaml", "Pulumi.onprem.yaml", "Pulumi.aks.yaml"], ["aks", "onprem"]),
        (["Pulumi.yaml", "Pulumi.prod-eu.yaml"], ["prod-eu"]),
        (["Pulumi.yaml", "Pulumi.a.yml", "stack.yaml", "Pulumi..yaml", "Pulumi.b.yaml.bak"], []),
        (["Pulumi.yaml", "Pulumi.x.y.yaml", "Pulumi.my_lab.yaml"], ["my_lab", "x.y"]),
    ],
)
def test_stack_names_are_every_pulumi_stack_file(tmp_path: Path, files: list[str], names: list[str]) -> None:
    for f in files:
        (tmp_path / f).write_text("config: {}\n")
    (tmp_path / "Pulumi.dir.yaml").mkdir()  # a folder is no stack file
    assert stack_names(tmp_path) == names


def test_the_workflow_matrix_gives_each_stack_its_platform_kind(tmp_path: Path) -> None:
    shutil.copyfile(STACKS_DIR / "team-aks.yaml", tmp_path / "Pulumi.prod.yaml")
    shutil.copyfile(STACKS_DIR / "team-onprem.yaml", tmp_path / "Pulumi.lab.yaml")
    (tmp_path / "Pulumi.broken.yaml").write_text("config: [\n")
    assert github_matrix(tmp_path) == [
        {"stack": "broken", "kind": "unknown"},  # its plan diff names the problem
        {"stack": "lab", "kind": "onprem"},
        {"stack": "prod", "kind": "aks"},
    ]


#: What a team's checkout needs to plan and test its stacks (workloads: the verify Jobs' scripts; e2e:
#: tests/conftest.py reads e2e/upstream.py); the Go sources and built tools of e2e/ are not needed.
_COPIED = ("components", "e2e", "tests", "workloads", "__main__.py", "Pulumi.yaml", "pyproject.toml", "Makefile")


def _ignored(folder: str, names: list[str]) -> set[str]:
    """Caches, and the folders of e2e/ (Go sources and built tools, which no stack test reads)."""
    skip = {n for n in names if n in ("__pycache__", ".hypothesis") or n.endswith(".pyc")}
    if Path(folder) == ROOT / "e2e":
        skip |= {n for n in names if (Path(folder) / n).is_dir()}
    return skip


def _team_checkout(tmp_path: Path) -> Path:
    """A copy of the repository whose stacks are a team's own: both samples replaced, a third added."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in _COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=_ignored)
        else:
            shutil.copyfile(src, repo / name)
    (repo / ".venv").symlink_to(Path(sys.prefix))  # this suite's virtualenv: `make` finds its .venv/bin/python
    shutil.copyfile(STACKS_DIR / "team-onprem.yaml", repo / "Pulumi.onprem.yaml")
    shutil.copyfile(STACKS_DIR / "team-aks.yaml", repo / "Pulumi.aks.yaml")
    third = (STACKS_DIR / "team-onprem.yaml").read_text().replace("kubeconfigContext: lab", "kubeconfigContext: lab-2")
    (repo / "Pulumi.mycluster.yaml").write_text(third)
    return repo


def _run(cmd: list[str], repo: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, upstream.ENV: str(upstream.upstream_dir())}
    if not upstream.present():
        env[upstream.OPT_OUT] = "1"  # the stack tests read no upstream file
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900, check=False)


def _stack_tests(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The tests that read the root stacks, run in ``repo``."""
    return _run([sys.executable, "-m", "pytest", "-q", *args, "-m", "root_stacks", "tests/test_stacks.py"], repo)


def test_a_teams_own_stacks_are_what_the_stack_tests_make_plans_and_the_workflow_plan(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not installed: `make plans` is one of the commands this test proves")
    repo = _team_checkout(tmp_path)
    # The pull-request workflow's matrix (.github/workflows/pr.yml, job `stacks`).
    listed = _run([sys.executable, "-m", "components.plan.stacks", "--github-matrix"], repo)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {"stack": "aks", "kind": "aks"},
        {"stack": "mycluster", "kind": "onprem"},
        {"stack": "onprem", "kind": "onprem"},
    ]
    # `make plans`: every stack, from the team's files (its contexts, not the samples').
    made = _run(["make", "-s", "-o", ".venv/.runtime", "plans"], repo)
    assert made.returncode == 0, made.stdout + made.stderr
    assert sorted(p.name for p in (repo / "plan").iterdir()) == ["aks", "mycluster", "onprem"]
    assert "Target: kubeconfig context 'lab'" in (repo / "plan" / "onprem" / "summary.txt").read_text()
    assert "Target: kubeconfig context 'lab-2'" in (repo / "plan" / "mycluster" / "summary.txt").read_text()
    assert "AKS cluster 'ml-aks'" in (repo / "plan" / "aks" / "summary.txt").read_text()
    # The stack tests: every root stack, whatever it holds, and nothing else of the root's.
    tested = _stack_tests(repo, "-rA")
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    for name in ("aks", "mycluster", "onprem"):
        assert f"PASSED tests/test_stacks.py::test_every_root_stack_parses_passes_the_rules_and_plans[{name}]" in (
            tested.stdout
        )
    # The twin: a stack with a problem (more GPUs asked than its cluster has) fails them, naming its key.
    third = (repo / "Pulumi.mycluster.yaml").read_text()
    (repo / "Pulumi.mycluster.yaml").write_text(third.replace("quota: {gpus: 8,", "quota: {gpus: 80,"))
    failed = _stack_tests(repo, "-k", "mycluster")
    assert failed.returncode == 1 and "gpuaas:teams[0].quota.gpus" in failed.stdout, failed.stdout[-4000:]


def test_stack_builds_under_mocks(stack: str, run_of: Callable[[str], Run]) -> None:
    run = run_of(stack)
    assert run.outputs["platform"] == stack
    platform = [r for r in run.records if r.type == "gpuaas:index:Platform"]
    assert len(platform) == 1
    # Every resource sits below the Platform component.
    by_urn = {r.urn: r for r in run.records}
    for r in run.records:
        if r is platform[0]:
            continue
        node = r
        while node.parent in by_urn and node.parent != platform[0].urn:
            node = by_urn[node.parent]
        assert node.parent == platform[0].urn, r.urn


def test_cluster_objects_have_explicit_names(stack: str, run_of: Callable[[str], Run]) -> None:
    for r in run_of(stack).records:
        if r.type.startswith("kubernetes:") and r.custom and not r.type.startswith("pulumi:providers"):
            if r.type == "kubernetes:helm.sh/v3:Release":
                assert r.inputs.get("name"), r.name
            else:
                assert (r.inputs.get("metadata") or {}).get("name"), r.name


def test_plan_is_byte_identical_across_runs(stack: str, tmp_path: Path) -> None:
    write_plan(stack, tmp_path / "a", stack_file=stack_path(stack))
    write_plan(stack, tmp_path / "b", stack_file=stack_path(stack))
    a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert a == b
    assert Path(stack) / "summary.txt" in a


def test_plan_masks_secret_outputs() -> None:
    def program() -> None:
        pulumi.export("token", pulumi.Output.secret("s3cr3t"))
        pulumi.export("plain", "visible")

    run = run_program("onprem", config=fixture_config("onprem"), program=program)
    out = plan_files(run)["outputs.yaml"]
    assert "s3cr3t" not in out and "[secret]" in out and "visible" in out


def test_runs_in_one_process_do_not_leak_outputs() -> None:
    onprem = run_program("onprem", config=fixture_config("onprem"))
    aks = run_program("aks", config=fixture_config("aks"))
    assert "partitionsConf" in onprem.outputs
    assert "partitionsConf" not in aks.outputs
