"""What the pages say, checked against what the code does: the README's two commands, the team
lead's examples planned against the last run, the error and refusal examples printed exactly so."""

from __future__ import annotations

import copy
import re
from datetime import date
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.loader import parse_config, parse_stack
from components.model import kubernetes
from components.model.errors import ConfigError
from components.plan.diff import PlanDiff, compare, read_tree
from components.plan.offline import ROOT, run_program, stack_config
from components.plan.writer import write_plan
from tests.conftest import raw_stack
from tests.docs.pages import pages, section, test_stack_file, text


def test_readme_starts_with_the_two_commands() -> None:
    first_block = text("README.md").split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[1] for line in first_block.strip().splitlines()] == ["plan", "test"]


def _add_a_team_snippets() -> list[dict[str, Any]]:
    """The YAML blocks of the team guide's "Add a team" examples, each read under ``config:``."""
    blocks = re.findall(r"```yaml\n(.*?)```", section("docs/guides/teams.md", "Add a team"), re.S)
    return [yaml.safe_load("config:\n" + b)["config"] for b in blocks]


def _apply(config: Any, snippet: Any) -> Any:
    """What "the other keys stay; append" means: mappings merge, lists get the new items."""
    if isinstance(config, dict) and isinstance(snippet, dict):
        return {**config, **{k: _apply(config.get(k), v) if k in config else v for k, v in snippet.items()}}
    if isinstance(config, list) and isinstance(snippet, list):
        return [*config, *snippet]
    return snippet


@pytest.fixture(scope="module")
def last_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test-owned stack's plan: its outputs stand for the stack's last run (``PREVIOUS=``)."""
    out = tmp_path_factory.mktemp("last-run")
    write_plan("onprem", out, test_stack_file("onprem"))
    return out / "onprem"


def _plan_against(last_run: Path, tmp_path: Path, config: dict[str, Any]) -> tuple[Any, PlanDiff]:
    stack_file = tmp_path / "Pulumi.onprem.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    run, _summary = write_plan("onprem", tmp_path / "plan", stack_file, previous=last_run / "outputs.yaml")
    return run, compare(read_tree(last_run), read_tree(tmp_path / "plan" / "onprem"))


def test_a_team_that_fits_changes_no_other_team(last_run: Path, tmp_path: Path) -> None:
    """The guide's first example, planned against the last run (the day-2 guards on): only its own
    objects are added, and only the summary and outputs change beside them."""
    team, *_ = _add_a_team_snippets()
    config = _apply(stack_config("onprem", test_stack_file("onprem")), team)
    _run, diff = _plan_against(last_run, tmp_path, config)
    assert diff.changed == ["outputs.yaml", "summary.txt"] and diff.removed == []
    assert {diff.owner[p][0] for p in diff.added} == {"robotics"}
    kinds = sorted(p.rsplit("/", 1)[1].split("-", 1)[0] for p in diff.added)
    assert kinds == [
        "ClusterQueue", "LimitRange", "LocalQueue", "Namespace", "PrometheusRule", "ResourceQuota", "ResourceQuota",
        "RoleBinding",
    ]  # fmt: skip


def test_a_team_with_a_partition_changes_what_the_guide_says(last_run: Path, tmp_path: Path) -> None:
    _, team, platform = _add_a_team_snippets()
    config = _apply(_apply(stack_config("onprem", test_stack_file("onprem")), team), platform)
    run, diff = _plan_against(last_run, tmp_path, config)
    assert run.outputs["teams"]["robotics"]["quota"]["requests.nvidia.com/sriov8007"] == "8"
    assert diff.removed == []
    # vision (the verifying team) probes the new partition; no other probe changes (issue 35 item 11).
    assert [p for p in diff.added if diff.owner[p][0] != "robotics"] == [
        "k8s/_cluster/Node-gpu-node-07.patch.yaml",
        "k8s/vision/Job-isolation-vision-to-robotics.yaml",
    ]
    quotas = {p.split("/")[1] for p in diff.changed if p.endswith("ResourceQuota-gpuaas-team-quota.yaml")}
    assert quotas == {"language", "speech", "research", "inference"}  # the guide's list; vision, platform-qa stay
    rest = sorted(p for p in diff.changed if not p.endswith("ResourceQuota-gpuaas-team-quota.yaml"))
    assert rest == [
        "k8s/_cluster/NicClusterPolicy-nic-cluster-policy.yaml",
        "k8s/monitoring/PrometheusRule-gpuaas-fleet.yaml",  # the GPUs each node group offers
        "k8s/nvidia-network-operator/ConfigMap-gpuaas-opensm-partitions-0.yaml",
        "k8s/nvidia-network-operator/ConfigMap-gpuaas-opensm.yaml",
        "k8s/nvidia-network-operator/ConfigMap-gpuaas-vf-guids-h100-full-0.yaml",
        "k8s/nvidia-network-operator/ConfigMap-gpuaas-vf-guids-h100-mig-0.yaml",
        "k8s/nvidia-network-operator/ConfigMap-gpuaas-vf-guids-h100-shared-0.yaml",
        "k8s/nvidia-network-operator/ConfigMap-gpuaas-vf-pkeys.yaml",
        "k8s/nvidia-network-operator/DaemonSet-ib-node-config.yaml",
        "opensm/partitions.conf",
        "outputs.yaml",
        "summary.txt",
    ]


def test_the_vf_change_needs_its_acknowledgement(last_run: Path, tmp_path: Path) -> None:
    """The guide's flag, walked through: without ``fabric.reconfigure: true`` the guard refuses."""
    _, team, platform = _add_a_team_snippets()
    assert platform["gpuaas:platform"]["fabric"]["reconfigure"] is True
    platform = copy.deepcopy(platform)
    del platform["gpuaas:platform"]["fabric"]["reconfigure"]
    with pytest.raises(pulumi.RunError, match=r"gpuaas:platform\.fabric\.vfsPerHca: changes from '6' to '7'"):
        _plan_against(
            last_run, tmp_path, _apply(_apply(stack_config("onprem", test_stack_file("onprem")), team), platform)
        )


def test_a_team_with_a_partition_says_why_it_changes_the_platform() -> None:
    """Without the platform snippet the stack refuses the team: the guide says what to change."""
    _, team, _platform = _add_a_team_snippets()
    with pytest.raises(ConfigError) as err:
        parse_stack(_apply(stack_config("onprem", test_stack_file("onprem")), team))
    assert [i.path for i in err.value.issues] == ["gpuaas:teams[*].quota.gpus", "gpuaas:teams[6].partition.vfIndex"]
    guide = text("docs/guides/teams.md")
    assert "all six VF indices" in guide and "all 32 whole GPUs" in guide


def test_pages_commands_use_the_virtualenv() -> None:
    """Item 15: a bare ``python -m components...`` is not the venv's Python on a fresh machine."""
    bare = [
        f"{p.relative_to(ROOT)}: {m}"
        for p in pages()
        if p.parent.name != "contributing"  # the contributing pages name modules, not commands to copy
        for m in re.findall(r"(?<![/\w.])python3? -m components\.\S+", p.read_text())
        if "reference" not in m  # the generated reference's comment names its generator
    ]
    assert not bare, f"write .venv/bin/python -m ... or a make target: {bare}"


def test_error_example_is_what_the_plan_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bad-config example of "What the config is checked against", made on the sample file, printed exactly so."""
    from components.plan.writer import main

    sample = test_stack_file("onprem").read_text()
    bad = sample.replace('{pkey: "0x0002", vfIndex: 1}', '{pkey: "0x8000", vfIndex: 1}').replace(
        '{pkey: "0x0003", vfIndex: 2}', '{pkey: "0x0003", vfIndex: 6}'
    )
    assert bad != sample
    f = tmp_path / "Pulumi.onprem.yaml"
    f.write_text(bad)
    assert main(["onprem", "--stack-file", str(f), "--out", str(tmp_path / "plan"), "--quiet"]) == 2
    page = text("docs/concepts/config-checks.md")
    example = page.split("where it is written:\n\n```\n", 1)[1].split("```", 1)[0]
    assert capsys.readouterr().err == example


def _kubernetes_section() -> str:
    return text("docs/reference/versions.md").split("\n## ", 1)[0]


def test_support_table_is_the_models() -> None:
    """One table, in components/model/kubernetes.py: the versions page shows it, row for row."""
    rows = [
        line.strip("|").split(" | ") for line in _kubernetes_section().splitlines() if re.match(r"^\| 1\.\d+ \|", line)
    ]
    want = [
        [s.name, str(s.end_of_life), str(s.aks_ga or "—"), str(s.aks_end_of_support or "—"), s.source]
        for s in kubernetes.MINORS
    ]
    assert [[c.strip() for c in r] for r in rows] == want


def test_version_refusal_is_what_the_rule_prints() -> None:
    raw = raw_stack("aks")
    raw["platform"]["kubernetesVersion"] = "1.34.10"
    with pytest.raises(ConfigError) as err:
        parse_config(raw, date(2026, 12, 1))
    example = _kubernetes_section().split("```\n", 1)[1].split("```", 1)[0]
    assert [str(i) for i in err.value.issues] == example.splitlines()


def test_the_components_guide_program_builds_the_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guide's Python program, run under the mocks from another folder with its own config file,
    registers the same resources and exports as the project's own program."""
    snippet = re.search(r"```python\n(.*?)```", text("docs/guides/components.md"), re.S)
    assert snippet is not None
    config = stack_config("onprem", test_stack_file("onprem"))
    (tmp_path / "gpuaas.yaml").write_text(yaml.safe_dump({"config": config}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUAAS_TODAY", raising=False)
    theirs = run_program("onprem", config=config, program=lambda: exec(snippet.group(1), {"__name__": "program"}))
    ours = run_program("onprem", config=config)
    assert sorted(r.urn for r in theirs.records) == sorted(r.urn for r in ours.records)
    assert set(ours.outputs) - set(theirs.outputs) == {"platform", "stack", "outputsFormat"}  # __main__'s own
