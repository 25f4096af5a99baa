"""Every plan checks its objects against the API server's size limits, naming the config key (issue #21, item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.plan import api_limits
from components.plan.writer import main
from tests.conftest import fixture_config


def _plan(tmp_path: Path, config: dict[str, object]) -> int:
    stack_file = tmp_path / "Pulumi.candidate.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    return main(["onprem", "--stack-file", str(stack_file), "--out", str(tmp_path / "plan"), "--quiet"])


def test_a_description_too_big_for_etcd_is_refused_naming_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = fixture_config("onprem")
    config["gpuaas:queues"]["priorityClasses"][0]["description"] = "x" * api_limits.MAX_OBJECT_BYTES
    assert _plan(tmp_path, config) == 2
    err = capsys.readouterr().err
    assert (
        "gpuaas:queues.priorityClasses[0].description: 1572864 bytes make WorkloadPriorityClass production too big"
        in err
    )
    assert "etcd accepts at most 1572864 (1.5 MiB) per write" in err
    assert not (tmp_path / "plan").exists(), "a refused plan writes nothing"
    # the twin: a long description that fits is planned
    config["gpuaas:queues"]["priorityClasses"][0]["description"] = "x" * (api_limits.MAX_OBJECT_BYTES // 2)
    assert _plan(tmp_path, config) == 0


def test_an_object_grown_by_the_fleet_is_named_as_itself() -> None:
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "namespace": "n"}}
    big["data"] = {f"k{i}": "v" * 1000 for i in range(1100)}  # 1.1 MB of 1000-byte values, no config string
    (issue,) = api_limits.object_size_issues([big], {"gpuaas:teams": [{"name": "a"}]})
    assert issue.path == "plan: ConfigMap n/m" and "ConfigMap data is" in issue.message
    assert api_limits.object_size_issues([{**big, "data": {"k": "v"}}], {}) == []
