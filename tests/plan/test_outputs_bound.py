"""The size bound on ``--previous`` never refuses what the tool itself writes (issue 35, item 18).

A 5000-node fleet with fully qualified node names exports 12.7 MB of outputs (partitions.conf lists
every GUID of every partition), past the 8 MiB bound of a stack file that the outputs were read with.
The outputs here are the program's own exports at that scale, rendered by the functions the platform
exports them from, and written with the plan writer's own ``dump``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import benchmarks.plan_scale as bench
from components.fabric.partitions import partitions_conf
from components.guards import fabric as fabric_guard
from components.guards import mig
from components.loader import parse_stack
from components.model import yamlfile
from components.model.errors import ConfigError
from components.plan import writer
from components.plan.offline import Record, Run
from components.plan.previous import read_previous


def _fleet_outputs(nodes: int) -> str:
    """The node-sized outputs of a ``nodes`` fleet with fully qualified names, 12 partitioned teams."""
    config = bench.synthetic_config(nodes, 64, vfs=12)
    for node in config["gpuaas:platform"]["nodes"]:
        node["name"] = f"{node['name']}.gpu-fleet.eu-west-3.compute.internal.example.com"
    for t, team in enumerate(config["gpuaas:teams"][:12]):
        team["partition"] = {"pkey": t + 1, "vfIndex": t}
        team["quota"]["rdma"] = 8
    cfg = parse_stack(config)
    outputs = {
        "partitionsConf": partitions_conf(cfg),
        fabric_guard.OUTPUT: fabric_guard.fabric_layout(cfg),
        mig.NODE_OUTPUT: mig.node_layouts(cfg),
        mig.OUTPUT: mig.mig_layouts(cfg),
    }
    return writer.dump(outputs)


def test_the_outputs_of_5000_nodes_are_within_the_outputs_bound(tmp_path: Path) -> None:
    text = _fleet_outputs(5000)
    assert len(text.encode()) > 12_700_000 > yamlfile.MAX_BYTES  # what the 8 MiB bound refused
    file = tmp_path / "outputs.yaml"
    file.write_text(text)
    assert yamlfile.read_text(file, "outputs file", yamlfile.MAX_OUTPUTS_BYTES) == text


def test_an_outputs_file_past_the_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    file = tmp_path / "outputs.yaml"
    with file.open("wb") as f:  # sparse: nothing is written or read
        f.truncate(yamlfile.MAX_OUTPUTS_BYTES + 1)
    with pytest.raises(ConfigError) as err:
        read_previous(file, "onprem")
    assert str(err.value.issues[0]) == (
        f"--previous {file}: is {yamlfile.MAX_OUTPUTS_BYTES + 1} bytes; an outputs file is at most "
        f"{yamlfile.MAX_OUTPUTS_BYTES} bytes"
    )


def _run(outputs: dict[str, object]) -> Run:
    return Run(stack="onprem", records=list[Record](), outputs=outputs, secret_outputs=set())


def test_the_writer_writes_no_outputs_it_would_not_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlfile, "MAX_OUTPUTS_BYTES", 1000)
    with pytest.raises(ConfigError) as err:
        writer.plan_files(_run({"partitionsConf": "x" * 2000}))
    assert str(err.value.issues[0]).startswith("outputs.yaml: would be 20")
    assert "the day-2 guards read outputs of at most 1000 bytes" in str(err.value.issues[0])
    assert "outputs.yaml" in writer.plan_files(_run({"partitionsConf": "x" * 500}))  # the allowed twin
