"""Day-2 MIG guard: a layout change needs ``mig.reconfigure: true``; the run stops before labels move."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.guards import mig as mig_guard
from components.loader import parse_config
from components.plan.offline import RecordingMonitor, run_program
from components.plan.writer import main as plan_main
from tests.conftest import fixture_config, last_outputs, qualified, raw_stack, stack_path

MIG_GROUP = 0  # h100-mig in tests/stacks/onprem.yaml, layout 1x4g.40gb-3x1g.10gb on gpu-node-05
NODE_PATCH = "kubernetes:core/v1:NodePatch"


def _onprem(**mig: Any) -> dict[str, Any]:
    raw = raw_stack("onprem")
    raw["platform"]["nodeGroups"][MIG_GROUP]["mig"].update(mig)
    return raw


def _applied(**overrides: str) -> dict[str, str]:
    """The layouts of the tests' onprem stack, as its last run exported them, with overrides."""
    return {**mig_guard.mig_layouts(parse_config(raw_stack("onprem"))), **overrides}


def test_checked_in_stack_exports_its_layouts() -> None:
    assert _applied() == {"h100-mig": "1x4g.40gb-3x1g.10gb", "h100-shared": "all-disabled", "h100-full": "all-disabled"}


@pytest.mark.parametrize(
    "previous",
    [None, {}, _applied(), {"h100-mig": "1x4g.40gb-3x1g.10gb"}],
    ids=["first-run", "empty", "same", "subset"],
)
def test_unchanged_layouts_pass_silently(previous: dict[str, str] | None) -> None:
    assert mig_guard.check(parse_config(raw_stack("onprem")), previous) == ([], [])


def test_a_new_group_passes() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodeGroups"].append({"name": "a100", "gpuModel": "A100-40GB", "mig": {"layout": "all-1g.5gb"}})
    assert mig_guard.check(parse_config(raw), _applied()) == ([], [])


def test_a_changed_layout_without_acknowledgement_names_key_layouts_nodes_and_drain() -> None:
    issues, warnings = mig_guard.check(parse_config(raw_stack("onprem")), _applied(**{"h100-mig": "all-1g.10gb"}))
    assert warnings == []
    (issue,) = issues
    assert issue.path == "gpuaas:platform.nodeGroups[0].mig"
    for needle in (
        "'all-1g.10gb' to '1x4g.40gb-3x1g.10gb'",
        "gpu-node-05",
        "kubectl cordon -l gpuaas.io/node-group=h100-mig",
        "kubectl drain -l gpuaas.io/node-group=h100-mig --ignore-daemonsets",
        "gpuaas:platform.nodeGroups[0].mig.reconfigure: true",
    ):
        assert needle in issue.message


def test_turning_mig_off_is_a_change_too() -> None:
    """Time-slicing or whole GPUs instead of MIG resets the GPUs just the same."""
    raw = _onprem()
    raw["platform"]["nodeGroups"][MIG_GROUP]["mig"] = {}
    for team in raw["teams"]:
        team["quota"].pop("mig", None)  # no MIG profile is offered any more
    (issue,), _ = mig_guard.check(parse_config(raw), _applied())
    assert "'1x4g.40gb-3x1g.10gb' to 'all-disabled'" in issue.message


def test_acknowledged_change_passes_and_a_stale_flag_warns() -> None:
    acked = parse_config(_onprem(reconfigure=True))
    assert mig_guard.check(acked, _applied(**{"h100-mig": "all-1g.10gb"})) == ([], [])
    issues, (warning,) = mig_guard.check(acked, _applied())
    assert issues == []
    assert warning.startswith("gpuaas:platform.nodeGroups[0].mig.reconfigure is true but h100-mig keeps")


def _nodes_applied(**overrides: str) -> dict[str, str]:
    return {**mig_guard.node_layouts(parse_config(raw_stack("onprem"))), **overrides}


def test_moving_a_node_into_a_mig_group_is_a_change_of_that_node() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodes"][0]["nodeGroup"] = "h100-mig"  # gpu-node-01, from h100-full (no MIG)
    raw["quotaPolicy"] = {"allowOversubscription": True}
    raw.setdefault("queues", {})["elastic"] = False  # hard quotas: elastic ones refuse oversubscription
    cfg = parse_config(raw)
    issues, _ = mig_guard.check(cfg, _applied(), _nodes_applied())
    (issue,) = issues
    assert issue.path == "gpuaas:platform.nodes[0].nodeGroup"
    assert "moves gpu-node-01 into h100-mig" in issue.message
    assert "'all-disabled' to '1x4g.40gb-3x1g.10gb'" in issue.message
    assert "kubectl drain gpu-node-01 " in issue.message
    assert "gpuaas:platform.nodeGroups[0].mig.reconfigure: true" in issue.message
    # Acknowledged on the group it moves into: passes, and that flag is not called stale.
    raw["platform"]["nodeGroups"][MIG_GROUP]["mig"]["reconfigure"] = True
    assert mig_guard.check(parse_config(raw), _applied(), _nodes_applied()) == ([], [])


def test_moving_a_node_between_groups_of_one_layout_is_no_change() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodes"][0]["nodeGroup"] = "h100-shared"  # all-disabled either way
    raw["quotaPolicy"] = {"allowOversubscription": True}
    raw.setdefault("queues", {})["elastic"] = False  # hard quotas: elastic ones refuse oversubscription
    assert mig_guard.check(parse_config(raw), _applied(), _nodes_applied()) == ([], [])


def test_a_group_change_is_reported_once_not_per_node() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodes"].append({"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-mig"})
    previous_nodes = {**_nodes_applied(), "gpu-node-05": "all-1g.10gb", "gpu-node-07": "all-1g.10gb"}
    issues, _ = mig_guard.check(parse_config(raw), _applied(**{"h100-mig": "all-1g.10gb"}), previous_nodes)
    assert [i.path for i in issues] == ["gpuaas:platform.nodeGroups[0].mig"]


def test_large_groups_are_summarised() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodes"] += [{"name": f"mig-{i:02d}", "id": 100 + i, "nodeGroup": "h100-mig"} for i in range(9)]
    (issue,), _ = mig_guard.check(parse_config(raw), _applied(**{"h100-mig": "all-disabled"}))
    assert "… (10 nodes)" in issue.message


def _aks_with_mig() -> dict[str, Any]:
    raw = raw_stack("aks")
    raw["platform"]["gpuPools"][1]["mig"] = {"layout": "all-1g.10gb"}
    raw["quotaPolicy"] = {"allowOversubscription": True}  # whole-GPU quotas outlive the pool's GPUs
    raw.setdefault("queues", {})["elastic"] = False  # hard quotas: elastic ones refuse oversubscription
    return raw


def test_aks_pools_say_how_to_drain_a_pool() -> None:
    raw = _aks_with_mig()
    cfg = parse_config(raw)
    previous = {**mig_guard.mig_layouts(cfg), "ndh100b": "all-disabled"}
    (issue,), _ = mig_guard.check(cfg, previous)
    assert issue.path == "gpuaas:platform.gpuPools[1].mig"
    assert "kubectl cordon -l kubernetes.azure.com/agentpool=ndh100b" in issue.message


# --------------------------------------------------------------------------------------------
# The program: the guard reads the last run's outputs and holds the labels back.


def test_program_stops_on_an_unacknowledged_change() -> None:
    with pytest.raises(pulumi.RunError) as err:
        run_program(
            "onprem", config=fixture_config("onprem"), previous={"migLayouts": _applied(**{"h100-mig": "all-1g.10gb"})}
        )
    assert str(err.value).startswith("gpuaas: 1 problem in the stack config:\n  gpuaas:platform.nodeGroups[0].mig: ")


def test_program_stops_on_aks_too() -> None:
    raw = _aks_with_mig()
    layouts = mig_guard.mig_layouts(parse_config(raw))
    with pytest.raises(pulumi.RunError, match=r"gpuPools\[1\]\.mig"):
        run_program("aks", config=qualified(raw), previous={"migLayouts": {**layouts, "ndh100b": "all-disabled"}})


def test_a_stopped_run_records_neither_its_layouts_nor_its_mig_configs() -> None:
    """Outputs are sent even by a failed run (``up --skip-preview``): the new layouts must not be.

    Otherwise the next run would compare the new layouts with themselves and relabel the nodes.
    """
    previous = {"migLayouts": _applied(**{"h100-mig": "all-1g.10gb"}), "migNodeLayouts": _nodes_applied()}
    monitor = RecordingMonitor(previous)
    with pytest.raises(pulumi.RunError):
        run_program("onprem", config=fixture_config("onprem"), previous=previous, monitor=monitor)
    assert not any(mig_guard.OUTPUT in outputs for outputs in monitor.stack_outputs)
    sent = {r.name for r in monitor.records}
    assert not any(r.type == NODE_PATCH for r in monitor.records)
    assert "gpuaas-gpu-operator-mig-config" not in sent, "the mig-parted ConfigMap would drop the old layout"


def test_a_passing_run_records_what_it_applied() -> None:
    monitor = RecordingMonitor(None)
    run_program("onprem", config=fixture_config("onprem"), monitor=monitor)
    assert monitor.stack_outputs[-1][mig_guard.OUTPUT] == _applied()
    assert monitor.stack_outputs[-1][mig_guard.NODE_OUTPUT] == _nodes_applied()


def test_acknowledged_change_relabels_the_nodes() -> None:
    run = run_program(
        "onprem", config=qualified(_onprem(reconfigure=True)), previous={"migLayouts": _applied(**{"h100-mig": "x"})}
    )
    patch = run.named("gpuaas-nodes-gpu-node-05")
    assert patch.inputs["metadata"]["labels"]["nvidia.com/mig.config"] == "1x4g.40gb-3x1g.10gb"
    assert run.outputs["migLayouts"] == _applied()


def test_the_gate_changes_nothing_it_lets_through() -> None:
    first = run_program("onprem", config=fixture_config("onprem"))
    again = run_program("onprem", config=fixture_config("onprem"), previous=first.outputs)
    assert sorted((r.name, repr(r.inputs)) for r in first.records) == sorted(
        (r.name, repr(r.inputs)) for r in again.records
    )
    assert {r.name for r in first.of_type(NODE_PATCH)} == {f"gpuaas-nodes-gpu-node-0{i}" for i in range(1, 7)}


def test_malformed_previous_output_warns_and_compares_nothing() -> None:
    cfg = parse_config(raw_stack("onprem"))
    assert mig_guard.enforce(cfg, ["not", "a", "map"], {"gpu-node-05": 3}) is True
    assert mig_guard.enforce(cfg, None) is True


def test_program_stops_when_a_node_moves_into_a_mig_group() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodes"][0]["nodeGroup"] = "h100-mig"
    raw["quotaPolicy"] = {"allowOversubscription": True}
    raw.setdefault("queues", {})["elastic"] = False  # hard quotas: elastic ones refuse oversubscription
    last = run_program("onprem", config=fixture_config("onprem")).outputs
    assert last[mig_guard.NODE_OUTPUT]["gpu-node-01"] == "all-disabled"
    with pytest.raises(pulumi.RunError, match=r"platform\.nodes\[0\]\.nodeGroup: moves gpu-node-01"):
        run_program("onprem", config=qualified(raw), previous=last)


def test_offline_plan_refuses_with_the_base_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "outputs.yaml"
    base.write_text(yaml.safe_dump(last_outputs("onprem", migLayouts=_applied(**{"h100-mig": "all-1g.10gb"}))))
    assert (
        plan_main(
            [
                "onprem",
                "--stack-file",
                str(stack_path("onprem")),
                "--out",
                str(tmp_path / "plan"),
                "--quiet",
                "--previous",
                str(base),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "gpuaas:platform.nodeGroups[0].mig: changes h100-mig" in err and "Traceback" not in err
    assert not (tmp_path / "plan").exists(), "a refused plan writes nothing"


@pytest.mark.parametrize(
    ("group", "mig", "last"),
    [
        ("h100-mig", {"layout": None, "profiles": {"1g.10gb": 3, "4g.40gb": 1}}, "1x4g.40gb-3x1g.10gb"),
        ("h100-mig", {"layout": "3x1g.10gb-1x4g.40gb"}, "1x4g.40gb-3x1g.10gb"),
        ("a100", {"layout": "all-1g.5gb"}, "7x1g.5gb"),
        ("a100", {"profiles": {"1g.5gb": 7}}, "all-1g.5gb"),
    ],
    ids=["profiles-for-layout", "terms-reordered", "all-for-count", "profiles-for-all"],
)
def test_the_same_layout_spelled_otherwise_is_no_change(group: str, mig: dict[str, Any], last: str) -> None:
    """Compared by meaning (issue #21, item 13): the GPUs are cut the same, so nothing is evicted."""
    raw = raw_stack("onprem")
    raw["platform"]["nodeGroups"].append({"name": "a100", "gpuModel": "A100-40GB", "mig": {"layout": "all-1g.5gb"}})
    [where] = [i for i, g in enumerate(raw["platform"]["nodeGroups"]) if g["name"] == group]
    raw["platform"]["nodeGroups"][where]["mig"] = mig
    cfg = parse_config(raw)
    assert mig_guard.check(cfg, _applied(**{group: last})) == ([], [])
    # the twin: another geometry is a real change, refused
    (issue,), _ = mig_guard.check(
        cfg, _applied(**{group: "1x4g.40gb-2x1g.10gb" if group == "h100-mig" else "all-2g.10gb"})
    )
    assert issue.path == f"gpuaas:platform.nodeGroups[{where}].mig" and "re-partitions its GPUs" in issue.message
