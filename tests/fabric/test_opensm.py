"""OpenSM delivery: partitions.conf in parts that fit a ConfigMap at any fleet size, reassembled exactly."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.fabric import opensm
from components.fabric.partitions import partitions_conf
from components.loader import gpuaas_section, parse_config
from components.plan import api_limits
from tests.conftest import raw_stack


def _fleet(nodes: int) -> Any:
    import benchmarks.plan_scale as bench

    return parse_config(gpuaas_section(bench.synthetic_config(nodes, 8, 6)))


def test_split_lines_keeps_order_and_lines_and_budget() -> None:
    text = "".join(f"line {i:03d} {'x' * (i % 7)}\n" for i in range(200))
    parts = opensm.split_lines(text, budget=300)
    assert "".join(parts) == text
    assert all(len(p.encode()) <= 300 and p.endswith("\n") for p in parts)
    assert len(parts) == 9  # 2594 bytes in parts of at most 300, no line split
    assert opensm.split_lines("a\n", budget=300) == ["a\n"]
    with pytest.raises(ValueError, match="does not fit"):
        opensm.split_lines("y" * 400 + "\n", budget=300)


def test_the_checked_in_stack_has_one_part_and_an_index() -> None:
    cfg = parse_config(raw_stack("onprem"))
    main, *parts = opensm.config_maps(cfg)
    assert [p["metadata"]["name"] for p in parts] == ["gpuaas-opensm-partitions-0"]
    assert main["data"][opensm.INDEX_KEY] == "gpuaas-opensm-partitions-0\n"
    assert parts[0]["data"]["partitions.conf"] == partitions_conf(cfg)
    assert "partitions.conf" not in main["data"], "one place for the file: the parts"


@pytest.mark.parametrize("nodes", [1000, 4000])
def test_partitions_of_a_large_fleet_fit_the_api_server(nodes: int) -> None:
    """1000 nodes x 8 HCAs x 6 teams is 1.2 MB of partitions.conf, 4000 nodes 4.8 MB."""
    cfg = _fleet(nodes)
    text = partitions_conf(cfg)
    as_one = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"partitions.conf": text}}
    assert api_limits.size_problems(as_one), "the old single ConfigMap would be refused"
    maps = opensm.config_maps(cfg)
    assert all(api_limits.size_problems(m) == [] for m in maps)
    names = maps[0]["data"][opensm.INDEX_KEY].splitlines()
    by_name = {m["metadata"]["name"]: m for m in maps[1:]}
    assert len(names) == len(by_name) > 1
    assert "".join(by_name[n]["data"]["partitions.conf"] for n in names) == text


def _assemble(tmp_path: Path, cfg: Any, parts: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the init container's script against files laid out as its volumes show them."""
    main, *maps = opensm.config_maps(cfg)
    source, part_dir, conf = tmp_path / "source", tmp_path / "parts", tmp_path / "conf"
    for d in (source, part_dir, conf):
        d.mkdir()
    for key, value in main["data"].items():
        (source / key).write_text(value)
    for i, text in enumerate(parts if parts is not None else [m["data"]["partitions.conf"] for m in maps]):
        (part_dir / f"{i:04d}").write_text(text)
    env = {"SOURCE": str(source), "PARTS": str(part_dir), "CONF": str(conf), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["bash", "-c", opensm.ASSEMBLE], env=env, capture_output=True, text=True, check=False)


def test_the_in_cluster_sm_reassembles_the_file_exactly(tmp_path: Path) -> None:
    cfg = _fleet(1000)
    result = _assemble(tmp_path, cfg)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "conf/partitions.conf").read_text() == partitions_conf(cfg)
    assert (tmp_path / "conf/opensm.conf").read_text() == opensm.config_map(cfg)["data"]["opensm.conf"]
    assert "from 2 parts" in result.stdout


def test_a_missing_or_stale_part_is_refused(tmp_path: Path) -> None:
    """Half a file is a parse error for OpenSM, which then drops every partition."""
    cfg = _fleet(1000)
    first = opensm.config_maps(cfg)[1]["data"]["partitions.conf"]
    result = _assemble(tmp_path, cfg, parts=[first])
    assert result.returncode != 0
    assert not (tmp_path / "conf/partitions.conf").exists()


def test_the_deployment_mounts_every_part_in_order() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["opensm"].update({"deployInCluster": True, "node": "gpu-node-01"})
    dep = opensm.deployment(parse_config(raw))
    spec = dep["spec"]["template"]["spec"]
    parts = next(v for v in spec["volumes"] if v["name"] == "parts")["projected"]["sources"]
    assert parts == [
        {"configMap": {"name": "gpuaas-opensm-partitions-0", "items": [{"key": "partitions.conf", "path": "0000"}]}}
    ]
    (init,) = spec["initContainers"]
    assert init["command"] == ["/bin/bash", "-c", opensm.ASSEMBLE]
    assert spec["containers"][0]["command"] == ["opensm", "--config", "/etc/opensm/opensm.conf"]


# --------------------------------------------------------------------------------------------
# The API server's size limits


def _cm(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": data}


def test_config_map_payload_limit_is_1_mib_of_values() -> None:
    assert api_limits.size_problems(_cm(a="x" * (1024 * 1024))) == []
    (problem,) = api_limits.size_problems(_cm(a="x" * (1024 * 1024), b="y"))
    assert problem == "ConfigMap data is 1048577 bytes; the API server allows 1048576 (1 MiB)"


def test_secret_data_counts_decoded_bytes() -> None:
    import base64

    raw = base64.b64encode(b"z" * 900_000).decode()  # 1.2 MB as base64, 900 kB decoded
    assert api_limits.size_problems({"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": raw}}) == []
    big = base64.b64encode(b"z" * (1024 * 1024 + 1)).decode()
    assert api_limits.size_problems({"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": big}})


def test_annotations_limit_is_256_kib_of_keys_and_values() -> None:
    ok = {"kind": "Pod", "metadata": {"name": "p", "annotations": {"k": "v" * (256 * 1024 - 1)}}}
    assert api_limits.size_problems(ok) == []
    over = {"kind": "Pod", "metadata": {"name": "p", "annotations": {"k": "v" * (256 * 1024)}}}
    (problem,) = api_limits.size_problems(over)
    assert problem.startswith("annotations are 262145 bytes")


def test_any_object_over_etcds_request_limit_is_refused() -> None:
    spec = {"kind": "Thing", "metadata": {"name": "t"}, "spec": {"x": "v" * (1536 * 1024)}}
    (problem,) = api_limits.size_problems(spec)
    assert "etcd accepts at most 1572864" in problem
    assert api_limits.size_problems({"kind": "Thing", "metadata": {"name": "t"}, "spec": {"x": "v" * 1000}}) == []
