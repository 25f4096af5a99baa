"""The README's configuration reference is generated from the model; drift fails here."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.loader import parse_config, parse_stack
from components.model import kubernetes
from components.model.errors import ConfigError
from components.plan.offline import ROOT, stack_config
from components.plan.reference import BEGIN, END, render
from components.plan.writer import write_plan
from tests.conftest import raw_stack


def test_config_reference_matches_the_model() -> None:
    text = (ROOT / "README.md").read_text()
    assert BEGIN in text and END in text, "README lost its config-reference markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert block == render(), "README config reference is stale: run `python -m components.reference` and paste it"


def test_readme_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    first_block = text.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[1] for line in first_block.strip().splitlines()] == ["plan", "test"]


def _add_a_team_snippets() -> list[dict[str, Any]]:
    """The YAML blocks of the README's "Add a team" example, each read under ``config:``."""
    text = (ROOT / "README.md").read_text()
    section = text.split("Add a team", 1)[1].split("\n**aks**", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return [yaml.safe_load("config:\n" + b)["config"] for b in blocks]


def _apply(config: Any, snippet: Any) -> Any:
    """What "the other keys stay; append" means: mappings merge, lists get the new items."""
    if isinstance(config, dict) and isinstance(snippet, dict):
        return {**config, **{k: _apply(config.get(k), v) if k in config else v for k, v in snippet.items()}}
    if isinstance(config, list) and isinstance(snippet, list):
        return [*config, *snippet]
    return snippet


def test_add_a_team_example_plans_on_the_checked_in_stack(tmp_path: Path) -> None:
    team, platform = _add_a_team_snippets()
    config = _apply(_apply(stack_config("onprem"), team), platform)
    stack_file = tmp_path / "Pulumi.onprem.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    run, summary = write_plan("onprem", tmp_path / "plan", stack_file)
    [new] = [t for t in config["gpuaas:teams"] if t["name"] == "robotics"]
    assert len(config["gpuaas:teams"]) == 7 and new == team["gpuaas:teams"][0]
    quota = run.outputs["teams"]["robotics"]["quota"]
    assert quota["requests.nvidia.com/sriov8007"] == "8"
    # Elastic quotas are on in the checked-in stack: the 8 GPUs are the team's guarantee (its
    # ClusterQueue's nominal quota); its ResourceQuota ceiling adds what it may borrow.
    [queue] = [r.inputs for r in run.records if r.inputs.get("kind") == "ClusterQueue" and "robotics" in r.name]
    nominal = {
        res["name"]: res["nominalQuota"]
        for group in queue["spec"]["resourceGroups"]
        for flavor in group["flavors"]
        for res in flavor["resources"]
        if res["nominalQuota"] not in ("0", 0)
    }
    assert nominal["nvidia.com/gpu"] in ("8", 8)
    assert int(quota["requests.nvidia.com/gpu"]) >= 8
    assert (tmp_path / "plan" / "onprem" / "k8s" / "robotics" / "ResourceQuota-gpuaas-team-quota.yaml").is_file()
    assert "robotics" in summary


def test_add_a_team_example_says_why_it_changes_the_platform() -> None:
    """Without the platform snippet the checked-in stack refuses the team: the README says what to change."""
    team, _platform = _add_a_team_snippets()
    with pytest.raises(ConfigError) as err:
        parse_stack(_apply(stack_config("onprem"), team))
    assert [i.path for i in err.value.issues] == ["gpuaas:teams[*].quota.gpus", "gpuaas:teams[6].partition.vfIndex"]
    text = (ROOT / "README.md").read_text()
    assert "all six VF indices" in text and "all 32 whole GPUs" in text


def test_readme_error_example_is_what_the_plan_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's bad-config example, made on the checked-in file, printed exactly so."""
    from components.plan.writer import main

    text = (ROOT / "Pulumi.onprem.yaml").read_text()
    bad = text.replace('{pkey: "0x0002", vfIndex: 1}', '{pkey: "0x8000", vfIndex: 1}').replace(
        '{pkey: "0x0003", vfIndex: 2}', '{pkey: "0x0003", vfIndex: 6}'
    )
    assert bad != text
    f = tmp_path / "Pulumi.onprem.yaml"
    f.write_text(bad)
    assert main(["onprem", "--stack-file", str(f), "--out", str(tmp_path / "plan"), "--quiet"]) == 2
    readme = (ROOT / "README.md").read_text()
    example = readme.split("where it is written:\n\n```\n", 1)[1].split("```", 1)[0]
    assert capsys.readouterr().err == example


def _kubernetes_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Kubernetes versions\n", 1)[1].split("\n## ", 1)[0]


def test_readme_support_table_is_the_models() -> None:
    """One table, in components/model/kubernetes.py: the README shows it, row for row."""
    rows = [
        line.strip("|").split(" | ") for line in _kubernetes_section().splitlines() if re.match(r"^\| 1\.\d+ \|", line)
    ]
    want = [
        [s.name, str(s.end_of_life), str(s.aks_ga or "—"), str(s.aks_end_of_support or "—"), s.source]
        for s in kubernetes.MINORS
    ]
    assert [[c.strip() for c in r] for r in rows] == want


def test_readme_version_refusal_is_what_the_rule_prints() -> None:
    raw = raw_stack("aks")
    raw["platform"]["kubernetesVersion"] = "1.34.10"
    with pytest.raises(ConfigError) as err:
        parse_config(raw, date(2026, 12, 1))
    example = _kubernetes_section().split("```\n", 1)[1].split("```", 1)[0]
    assert [str(i) for i in err.value.issues] == example.splitlines()
