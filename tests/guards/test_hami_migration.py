"""The migration path of a node group to HAMi: out of MIG first, then HAMi — never both in one run.

A HAMi node turns MIG Manager off, so a group (or node) that goes from a MIG layout straight to
HAMi would keep its GPUs in MIG mode forever; the day-2 guard stops that run whatever it
acknowledges, and lets the two-run path through.
"""

from __future__ import annotations

from components.guards import mig as mig_guard
from components.loader import parse_config
from tests.hami_cases import hami_raw

HAMI = 1  # h100-hami in tests/stacks/onprem-hami.yaml (gpu-node-06)
LAST = {"h100-mig": "1x4g.40gb-3x1g.10gb", "h100-full": "all-disabled"}


def test_mig_straight_to_hami_stops_even_with_reconfigure() -> None:
    raw = hami_raw()
    raw["platform"]["nodeGroups"][HAMI]["mig"] = {"reconfigure": True}
    issues, _ = mig_guard.check(parse_config(raw), {**LAST, "h100-hami": "all-1g.10gb"})
    assert [i.path for i in issues] == [f"gpuaas:platform.nodeGroups[{HAMI}].hami"]
    assert "Two runs: first remove hami" in issues[0].message


def test_the_two_run_path_passes() -> None:
    # Run 1: MIG off (reconfigure acknowledged), no hami yet.
    raw = hami_raw()
    group = raw["platform"]["nodeGroups"][HAMI]
    del group["hami"]
    group["mig"] = {"layout": "all-disabled", "reconfigure": True}
    for team in raw["teams"]:
        team["quota"].pop("hami", None)
    issues, _ = mig_guard.check(parse_config(raw), {**LAST, "h100-hami": "all-1g.10gb"})
    assert issues == []
    # Run 2: MIG is off on the last run's labels; HAMi now.
    issues, _ = mig_guard.check(parse_config(hami_raw()), {**LAST, "h100-hami": "all-disabled"})
    assert issues == []


def test_a_node_moved_from_a_mig_group_into_a_hami_group_stops() -> None:
    raw = hami_raw()
    raw["platform"]["nodes"].append({"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-hami"})
    cfg = parse_config(raw)
    # Last run: gpu-node-07 was in h100-mig.
    nodes = {**mig_guard.node_layouts(cfg), "gpu-node-07": "1x4g.40gb-3x1g.10gb"}
    issues, _ = mig_guard.check(cfg, {**LAST, "h100-hami": "all-disabled"}, nodes)
    assert [i.path for i in issues] == ["gpuaas:platform.nodes[6].nodeGroup"]
    assert "HAMi turns MIG Manager off" in issues[0].message
    # Its twin: the node moved into a group without MIG first (acknowledged), not into HAMi.
    raw["platform"]["nodes"][6]["nodeGroup"] = "h100-full"
    raw["platform"]["nodeGroups"][2]["mig"] = {"reconfigure": True}
    issues, _ = mig_guard.check(parse_config(raw), {**LAST, "h100-hami": "all-disabled"}, nodes)
    assert issues == []
