"""Every checked-in stack parses, builds under mocks and plans deterministically."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pulumi

from components.plan.offline import ROOT, Run, run_program
from components.plan.writer import plan_files, write_plan


def test_every_stack_file_is_tested() -> None:
    assert sorted(p.name for p in ROOT.glob("Pulumi.*.yaml")) == ["Pulumi.aks.yaml", "Pulumi.onprem.yaml"]


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
    write_plan(stack, tmp_path / "a")
    write_plan(stack, tmp_path / "b")
    a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert a == b
    assert Path(stack) / "summary.txt" in a


def test_plan_masks_secret_outputs() -> None:
    def program() -> None:
        pulumi.export("token", pulumi.Output.secret("s3cr3t"))
        pulumi.export("plain", "visible")

    run = run_program("onprem", program=program)
    out = plan_files(run)["outputs.yaml"]
    assert "s3cr3t" not in out and "[secret]" in out and "visible" in out


def test_runs_in_one_process_do_not_leak_outputs() -> None:
    onprem = run_program("onprem")
    aks = run_program("aks")
    assert "partitionsConf" in onprem.outputs
    assert "partitionsConf" not in aks.outputs
