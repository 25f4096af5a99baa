"""The plan as a tool: stack names are names, it touches only its own folder, and says what it targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.loader import parse_config
from components.model.errors import ConfigError
from components.plan.summary import subnet_manager, target
from components.plan.writer import main, plan_target, write_tree
from tests.conftest import ROOT, raw_stack, stack_path

ONPREM = stack_path("onprem")


def test_dotdot_stack_cannot_delete_the_folder_above_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``plan ..`` once replaced ``out/..`` — with the default ``--out plan``, the repository."""
    repo = tmp_path / "repo"
    (repo / "plan").mkdir(parents=True)
    (repo / "precious.txt").write_text("source")
    assert main(["..", "--stack-file", str(ONPREM), "--out", str(repo / "plan"), "--quiet"]) == 2
    assert (repo / "precious.txt").read_text() == "source"
    assert "'..' is not a stack name" in capsys.readouterr().err
    # The twin: a real name plans into out/<name>, next to nothing else.
    assert main(["candidate", "--stack-file", str(ONPREM), "--out", str(repo / "plan"), "--quiet"]) == 0
    assert (repo / "plan" / "candidate" / "summary.txt").is_file()
    assert sorted(p.name for p in repo.iterdir()) == ["plan", "precious.txt"]


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../../etc", "on prem", "x" * 101])
def test_stack_names_that_are_paths_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="is not a stack name"):
        plan_target(name, tmp_path / "plan")


def test_a_folder_that_is_not_a_plan_is_never_replaced(tmp_path: Path) -> None:
    """``--out . components`` must not delete the source folder that shares the stack's name."""
    src = tmp_path / "components"
    src.mkdir()
    (src / "code.py").write_text("x = 1\n")
    with pytest.raises(ConfigError, match="is not an earlier plan"):
        write_tree(src, {"summary.txt": "s", "outputs.yaml": "{}\n"})
    assert (src / "code.py").is_file()
    # An earlier plan (or an empty folder) is replaced: stale files go.
    old = tmp_path / "onprem"
    write_tree(old, {"summary.txt": "old", "outputs.yaml": "{}\n", "k8s/_cluster/Namespace-gone.yaml": "x"})
    write_tree(old, {"summary.txt": "new", "outputs.yaml": "{}\n"})
    assert sorted(str(p.relative_to(old)) for p in old.rglob("*")) == ["outputs.yaml", "summary.txt"]


def test_a_symlinked_plan_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "summary.txt").write_text("s")
    (elsewhere / "outputs.yaml").write_text("{}")
    link = tmp_path / "plan" / "onprem"
    link.parent.mkdir()
    link.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="symbolic link"):
        write_tree(link, {"summary.txt": "s", "outputs.yaml": "{}\n"})
    assert (elsewhere / "summary.txt").read_text() == "s"


def test_plan_file_paths_stay_inside_the_plan(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="leaves the plan folder"):
        write_tree(tmp_path / "p", {"../escape.yaml": "x"})
    assert not (tmp_path / "escape.yaml").exists()


def test_stack_file_of_another_platform_kind_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan"
    assert main(["onprem", "--stack-file", str(stack_path("aks")), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "gpuaas:platform.kind: 'aks', but stack 'onprem' is 'onprem' (onprem.yaml)" in err
    assert not out.exists()
    # Twins: a file of the stack's own kind, and a stack with no file of its own.
    candidate = tmp_path / "Pulumi.candidate.yaml"
    candidate.write_text(ONPREM.read_text().replace("gpusPerNode: 8", "gpusPerNode: 8", 1))
    assert main(["onprem", "--stack-file", str(candidate), "--out", str(out), "--quiet"]) == 0
    assert main(["aks-candidate", "--stack-file", str(stack_path("aks")), "--out", str(out), "--quiet"]) == 0


def test_missing_and_unreadable_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["onprem", "--stack-file", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"  {tmp_path / 'nope.yaml'}: no such stack file"
    assert main(["onprem", "--stack-file", str(tmp_path), "--out", str(tmp_path / "p")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_summary_names_the_target_cluster() -> None:
    onprem = raw_stack("onprem")
    assert target(parse_config(onprem)) == "kubeconfig context 'onprem-admin'"
    del onprem["platform"]["kubeconfigContext"]
    assert target(parse_config(onprem)).startswith("the current context of the ambient kubeconfig")
    aks = raw_stack("aks")
    assert target(parse_config(aks)) == (
        "AKS cluster 'gpuaas-aks' in resource group 'rg-gpuaas' (created), subscription "
        "00000000-0000-0000-0000-000000000000, location eastus"
    )
    aks["platform"].update(existingCluster=True, resourceGroup={"name": "rg-prod", "create": False})
    assert target(parse_config(aks)).startswith(
        "existing AKS cluster 'gpuaas-aks' in resource group 'rg-prod' (existing)"
    )


def test_summary_file_has_the_target_line(tmp_path: Path) -> None:
    assert main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(tmp_path), "--quiet"]) == 0
    lines = (tmp_path / "onprem" / "summary.txt").read_text().splitlines()
    assert lines[2] == "Target: kubeconfig context 'onprem-admin'"


def test_a_urn_registered_twice_is_a_problem_not_a_silent_plan() -> None:
    """The mocks accept a duplicate URN that the engine refuses; the plan must refuse it too."""
    from components.plan.offline import Record, Run
    from components.plan.writer import plan_files

    def record(name: str) -> Record:
        return Record(
            urn=f"urn:pulumi:s::gpuaas::kubernetes:core/v1:ConfigMap::{name}",
            type="kubernetes:core/v1:ConfigMap",
            name=name,
            custom=True,
            inputs={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "n"}},
            parent="",
            dependencies=[],
            provider="",
            protect=False,
            ignore_changes=[],
            delete_before_replace=False,
        )

    with pytest.raises(ConfigError, match="registered twice"):
        plan_files(Run(stack="s", records=[record("a"), record("a")], outputs={}, secret_outputs=set()))
    assert "k8s/n/ConfigMap-a.yaml" in plan_files(Run("s", [record("a"), record("b")], {}, set()))


def test_previous_outputs_that_are_not_yaml_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prev = tmp_path / "outputs.yaml"
    prev.write_bytes(b"\xff\xfe not text")
    assert (
        main(
            [
                "onprem",
                "--stack-file",
                str(stack_path("onprem")),
                "--previous",
                str(prev),
                "--out",
                str(tmp_path / "p"),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"--previous {prev}: is not UTF-8 text" in err and "Traceback" not in err
    # the twin: a whole earlier run of this stack
    assert (
        main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(tmp_path / "before"), "--quiet"]) == 0
    )
    prev = tmp_path / "before" / "onprem" / "outputs.yaml"
    assert (
        main(
            [
                "onprem",
                "--stack-file",
                str(stack_path("onprem")),
                "--previous",
                str(prev),
                "--out",
                str(tmp_path / "p"),
                "--quiet",
            ]
        )
        == 0
    )


def test_summary_names_the_subnet_manager_and_the_operators_action(tmp_path: Path) -> None:
    """Issue 35 item 13: outside the cluster, partitions.conf reaches the SM only by hand."""
    assert main(["onprem", "--stack-file", str(stack_path("onprem")), "--out", str(tmp_path), "--quiet"]) == 0
    line = (tmp_path / "onprem" / "summary.txt").read_text().splitlines()[3]
    assert line.startswith("Subnet manager: outside the cluster (UFM, NVIDIA OpenSM on a host, or a managed switch;")
    assert "OPERATOR ACTION after every change of opensm/: install opensm/partitions.conf (6 team partitions)" in line
    assert "docs/notes/subnet-manager.md" in line and (ROOT / "docs/notes/subnet-manager.md").is_file()


def test_an_in_cluster_subnet_manager_needs_no_operator_action_and_aks_has_none() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["opensm"] = {"deployInCluster": True, "node": "gpu-node-01"}
    line = subnet_manager(parse_config(raw))
    assert line is not None and line.startswith(
        "Subnet manager: NVIDIA OpenSM in the cluster (Deployment gpuaas-opensm"
    )
    assert "on node gpu-node-01" in line and "no operator action" in line and "OPERATOR ACTION" not in line
    assert subnet_manager(parse_config(raw_stack("aks"))) is None
