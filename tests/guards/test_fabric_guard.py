"""Day-2 fabric guard: a change that moves VFs under running pods needs an acknowledgement."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.guards import fabric, gate
from components.loader import parse_config
from components.plan.offline import RecordingMonitor, run_program
from components.plan.writer import main as plan_main
from tests.conftest import fixture_config, last_outputs, qualified, raw_stack, stack_path


def _applied(**overrides: str) -> dict[str, str]:
    """The fabric values of the tests' onprem stack, as its last run exported them."""
    return {**fabric.fabric_layout(parse_config(raw_stack("onprem"))), **overrides}


def _check(raw: dict[str, Any], previous: dict[str, str] | None) -> tuple[list[Any], list[str]]:
    return fabric.check(parse_config(raw), previous)


def test_checked_in_stack_exports_its_fabric() -> None:
    layout = _applied()
    assert layout["vfsPerHca"] == "6"
    assert layout["guidScheme"] == "base=0x0200000000000000 nodeBits=16 hcaBits=4 vfBits=8"
    assert layout["teams.vision.pkey"] == "0x0001" and layout["teams.vision.vfIndex"] == "0"
    assert fabric.fabric_layout(parse_config(raw_stack("aks"))) == {}


@pytest.mark.parametrize("previous", [None, {}, _applied()], ids=["first-run", "empty", "same"])
def test_unchanged_fabric_passes_silently(previous: dict[str, str] | None) -> None:
    assert _check(raw_stack("onprem"), previous) == ([], [])


def test_raising_vfs_per_hca_stops_with_key_values_and_drain() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["vfsPerHca"] = 8
    (issue,), warnings = _check(raw, _applied())
    assert warnings == []
    assert issue.path == "gpuaas:platform.fabric.vfsPerHca"
    for needle in (
        "from '6' to '8'",
        "sets sriov_numvfs to 0 and back on every HCA, destroying every VF on all 6 nodes",
        "kubectl drain -l feature.node.kubernetes.io/pci-15b3.present=true --ignore-daemonsets",
        "gpuaas:platform.fabric.reconfigure: true",
    ):
        assert needle in issue.message


def test_acknowledged_fleet_change_passes_and_a_stale_flag_warns() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"].update({"vfsPerHca": 8, "reconfigure": True})
    assert _check(raw, _applied()) == ([], [])
    raw["platform"]["fabric"]["vfsPerHca"] = 6
    issues, (warning,) = _check(raw, _applied())
    assert issues == [] and warning.startswith("gpuaas:platform.fabric.reconfigure is true but")


def test_a_new_guid_base_is_a_fleet_change_too() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["guidScheme"]["base"] = "0x0400000000000000"
    (issue,), _ = _check(raw, _applied())
    assert issue.path == "gpuaas:platform.fabric.guidScheme"
    assert "new GUID" in issue.message


def test_a_new_node_id_or_reordered_hcas_regive_guids_but_appended_hcas_do_not() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodes"][0]["id"] = 41
    raw["platform"]["nodeGroups"][1]["hcas"] = ["mlx5_1", "mlx5_0", *[f"mlx5_{i}" for i in range(2, 8)]]
    issues, _ = _check(raw, _applied())
    assert [i.path for i in issues] == ["gpuaas:platform.nodeGroups[1].hcas", "gpuaas:platform.nodes[0].id"]
    assert "changes gpu-node-01's id from 1 to 41" in issues[1].message
    assert "kubectl drain gpu-node-01 " in issues[1].message
    assert "the VFs of 1 nodes get new GUIDs" in issues[0].message
    appended = raw_stack("onprem")
    appended["platform"]["nodeGroups"][1]["hcas"].append("mlx5_8")
    assert _check(appended, _applied()) == ([], [])
    raw["platform"]["fabric"]["reconfigure"] = True
    assert _check(raw, _applied()) == ([], [])


def test_moving_a_team_to_another_vf_or_pkey_stops_per_key() -> None:
    raw = raw_stack("onprem")
    raw["teams"][0]["partition"] = {"pkey": "0x0007", "vfIndex": 0}
    raw["teams"][1]["partition"]["vfIndex"] = 5
    raw["teams"][5]["partition"]["vfIndex"] = 1  # platform-qa and language swap VFs
    issues, _ = _check(raw, _applied())
    by_path: dict[str, list[str]] = {}
    for i in issues:
        by_path.setdefault(i.path, []).append(i.message)
    assert sorted(by_path) == [
        "gpuaas:teams[0].partition.pkey",
        "gpuaas:teams[1].partition.vfIndex",
        "gpuaas:teams[5].partition.vfIndex",
    ]
    (pkey,) = by_path["gpuaas:teams[0].partition.pkey"]
    assert "changes vision's partition from 0x0001 to 0x0007" in pkey
    assert "kubectl -n vision get pods" in pkey and "gpuaas:teams[0].partition.reconfigure: true" in pkey
    moved = " ".join(by_path["gpuaas:teams[1].partition.vfIndex"])
    assert "moves language's partition from VF 1 to VF 5" in moved
    assert "VF 5 of every HCA was platform-qa's in the last run" in moved


def test_acknowledged_team_change_passes_and_a_stale_team_flag_warns() -> None:
    raw = raw_stack("onprem")
    raw["teams"][0]["partition"].update({"pkey": "0x0007", "reconfigure": True})
    assert _check(raw, _applied()) == ([], [])
    issues, (warning,) = _check(raw, _applied(**{"teams.vision.pkey": "0x0007"}))
    assert issues == [] and warning.startswith("gpuaas:teams[0].partition.reconfigure is true but vision's")


def test_a_new_team_on_a_free_vf_passes() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["vfsPerHca"] = 7
    raw["teams"].append({"name": "newcomer", "partition": {"pkey": "0x0007", "vfIndex": 6}})
    previous = {**_applied(), "vfsPerHca": "7"}
    assert _check(raw, previous) == ([], [])


def test_a_new_team_on_a_removed_teams_vf_stops() -> None:
    """A VF the last run gave another team may still be in use by that team's pods."""
    raw = raw_stack("onprem")
    gone = raw["teams"].pop(5)  # platform-qa, VF 5
    raw["teams"].append({"name": "newcomer", "partition": {"pkey": "0x0007", "vfIndex": 5}})
    (issue,), _ = _check(raw, _applied())
    assert issue.path == "gpuaas:teams[5].partition.vfIndex"
    assert f"VF 5 of every HCA was {gone['name']}'s in the last run" in issue.message


# --------------------------------------------------------------------------------------------
# The program: the guard holds the VF plan, the P_Key table, partitions.conf and the policy back.

HELD_BACK = ("gpuaas-sriov-host-gpuaas-vf-guids-", "gpuaas-sriov-host-gpuaas-vf-pkeys", "gpuaas-opensm-")


def _more_vfs() -> dict[str, Any]:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["vfsPerHca"] = 8
    return raw


def test_program_stops_on_an_unacknowledged_fabric_change() -> None:
    with pytest.raises(pulumi.RunError) as err:
        run_program("onprem", config=qualified(_more_vfs()), previous={"fabricLayout": _applied()})
    assert str(err.value).startswith("gpuaas: 1 problem in the stack config:\n  gpuaas:platform.fabric.vfsPerHca: ")


def test_the_vf_plan_partitions_and_policy_wait_for_the_guard() -> None:
    """Their inputs come through the gate, so a failing guard keeps them from being sent."""
    run = run_program("onprem", config=fixture_config("onprem"))
    gated = {r.name for r in run.records if any(d.endswith("::gpuaas-last-run") for d in r.dependencies)}
    held = {r.name for r in run.records if r.name.startswith(HELD_BACK)}
    # Three GUID shards, the P_Key table, partitions.conf's part and index.
    assert len(held) == 6 and held <= gated
    assert "gpuaas-nic-cluster-policy-policy" in gated
    assert "gpuaas-sriov-host-daemonset" not in gated, "the script itself is no fabric change"


def test_a_stopped_run_sends_no_vf_plan_and_records_no_fabric() -> None:
    previous = {"fabricLayout": _applied()}
    monitor = RecordingMonitor(previous)
    with pytest.raises(pulumi.RunError):
        run_program("onprem", config=qualified(_more_vfs()), previous=previous, monitor=monitor)
    sent = {r.name for r in monitor.records}
    assert not [n for n in sent if n.startswith(HELD_BACK)], "the new VF count would reach the nodes"
    assert "gpuaas-nic-cluster-policy-policy" not in sent
    assert not any(fabric.OUTPUT in outputs for outputs in monitor.stack_outputs)


def test_mig_and_fabric_problems_are_reported_together() -> None:
    previous = {"fabricLayout": _applied(), "migLayouts": {"h100-mig": "all-1g.10gb"}}
    with pytest.raises(pulumi.RunError) as err:
        run_program("onprem", config=qualified(_more_vfs()), previous=previous)
    text = str(err.value)
    assert text.startswith("gpuaas: 2 problems in the stack config:")
    assert "gpuaas:platform.fabric.vfsPerHca: " in text and "gpuaas:platform.nodeGroups[0].mig: " in text


def test_a_passing_run_records_its_fabric_and_changes_nothing_it_lets_through() -> None:
    first = run_program("onprem", config=fixture_config("onprem"))
    assert first.outputs[fabric.OUTPUT] == _applied()
    again = run_program("onprem", config=fixture_config("onprem"), previous=first.outputs)
    assert sorted((r.name, repr(r.inputs)) for r in first.records) == sorted(
        (r.name, repr(r.inputs)) for r in again.records
    )
    acked = _more_vfs()
    acked["platform"]["fabric"]["reconfigure"] = True
    run = run_program("onprem", config=qualified(acked), previous=first.outputs)
    assert run.outputs[fabric.OUTPUT]["vfsPerHca"] == "8"


def test_malformed_previous_output_warns_and_compares_nothing() -> None:
    assert gate.string_map("fabricLayout", ["x"]) is None
    assert fabric.check(parse_config(_more_vfs()), None) == ([], [])


def test_offline_plan_refuses_with_the_base_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "outputs.yaml"
    base.write_text(yaml.safe_dump(last_outputs("onprem", fabricLayout=_applied(**{"vfsPerHca": "4"}))))
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
    assert "gpuaas:platform.fabric.vfsPerHca: changes from '4' to '6'" in err and "Traceback" not in err
    assert not (tmp_path / "plan").exists(), "a refused plan writes nothing"


def test_a_refusal_is_reported_once_not_once_per_waiting_output(caplog: pytest.LogCaptureFixture) -> None:
    """Every gated Output fails with the guard's RunError; the futures nobody awaited must not each
    print "Future exception was never retrieved" and a traceback when they are collected (700
    lines per refused run: in a session that plans again, such as this suite, they are collected a
    few runs later)."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    for _ in range(3):
        with pytest.raises(pulumi.RunError):
            run_program("onprem", config=qualified(_more_vfs()), previous={"fabricLayout": _applied()})
        gc.collect()
    assert not [r for r in caplog.records if gate.UNRETRIEVED in r.getMessage()]
    # Any other exception nobody read still reaches asyncio's handler: nothing else is hidden.
    _unretrieved(asyncio.get_event_loop(), ValueError("not a refusal"))
    assert [r for r in caplog.records if gate.UNRETRIEVED in r.getMessage()]


def _unretrieved(loop: asyncio.AbstractEventLoop, exc: BaseException) -> None:
    """A future of ``loop`` that failed with ``exc`` and is collected unread."""
    fut = loop.create_future()
    fut.set_exception(exc)
    del fut
    gc.collect()


def test_the_handler_drops_only_refusals_and_is_installed_once(caplog: pytest.LogCaptureFixture) -> None:
    """What :func:`gate.report_refusals_once` removes is there without it."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    loop = asyncio.new_event_loop()
    try:
        _unretrieved(loop, pulumi.RunError("refused"))
        assert [r for r in caplog.records if gate.UNRETRIEVED in r.getMessage()]
        caplog.clear()
        gate.report_refusals_once(loop)
        handler = loop.get_exception_handler()
        gate.report_refusals_once(loop)  # a second run on the loop adds no second handler
        assert loop.get_exception_handler() is handler
        _unretrieved(loop, pulumi.RunError("refused"))
        assert not [r for r in caplog.records if gate.UNRETRIEVED in r.getMessage()]
        _unretrieved(loop, ValueError("not a refusal"))
        assert [r for r in caplog.records if gate.UNRETRIEVED in r.getMessage()]
    finally:
        loop.close()
