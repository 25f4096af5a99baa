"""Day-2 guard: an AKS cluster goes one Kubernetes minor at a time, never back (guards/kubernetes_version.py)."""

from __future__ import annotations

from datetime import date
from typing import Any

import pulumi
import pytest

from components.guards import kubernetes_version as guard
from components.guards import mig as mig_guard
from components.loader import parse_config
from components.model import versions
from components.model.config import StackConfig
from components.plan.offline import RecordingMonitor, run_program
from tests.conftest import fixture_config, qualified, raw_stack


def _aks(version: str, **platform: Any) -> StackConfig:
    raw = raw_stack("aks")
    raw["platform"].update(kubernetesVersion=version, **platform)
    if platform.get("existingCluster"):
        raw["platform"]["resourceGroup"]["create"] = False
    return parse_config(raw)


def _last(version: str | None) -> dict[str, Any]:
    """The outputs of an earlier run of the aks stack that applied ``version``."""
    out: dict[str, Any] = {mig_guard.OUTPUT: mig_guard.mig_layouts(parse_config(raw_stack("aks")))}
    if version is not None:
        out[guard.OUTPUT] = version
    return out


@pytest.mark.parametrize(
    ("was", "now"),
    [("1.35.7", "1.36.3"), ("1.36.2", "1.36.3"), ("1.36.3", "1.36.3"), ("1.35", "1.36.3")],
)
def test_one_minor_or_a_patch_forward_passes(was: str, now: str) -> None:
    assert guard.check(_aks(now), _last(was)) == ([], [])


def test_skipping_a_minor_is_refused_naming_the_next_one() -> None:
    cfg = _aks("1.37.2", gpuPools=_pools("Ubuntu2404"), systemPool=_system())
    (issue,), warnings = guard.check(cfg, _last("1.35.7"))
    assert warnings == []
    assert issue.path == "gpuaas:platform.kubernetesVersion"
    assert "1.37.2, but the last run applied 1.35.7: AKS upgrades a cluster one minor at a time" in issue.message
    assert "go to 1.36 first" in issue.message


def test_going_back_is_refused() -> None:
    (issue,), _ = guard.check(_aks("1.35.7"), _last("1.36.3"))
    assert "1.35.7, but the last run applied 1.36.3: an AKS cluster (and its node pools) only upgrades" in issue.message
    (patch,), _ = guard.check(_aks("1.36.2"), _last("1.36.3"))
    assert "only upgrades" in patch.message


def test_first_runs_existing_clusters_and_onprem_pass() -> None:
    assert guard.check(_aks("1.36.3"), {}) == ([], [])
    assert guard.check(_aks("1.36.3", existingCluster=True), _last("1.34.10")) == ([], [])
    onprem = parse_config(raw_stack("onprem"))
    assert guard.check(onprem, {mig_guard.OUTPUT: {}, guard.OUTPUT: "1.35.4"}) == ([], [])


def test_a_stack_that_ran_before_the_guard_is_warned_about() -> None:
    issues, (warning,) = guard.check(_aks(versions.AKS_KUBERNETES), _last(None))
    assert issues == []
    assert "the last run recorded no Kubernetes version" in warning and "1.33.5" in warning


def _pools(sku: str) -> list[dict[str, Any]]:
    return [{**p, "osSku": sku} for p in raw_stack("aks")["platform"]["gpuPools"]]


def _system() -> dict[str, Any]:
    return {**raw_stack("aks")["platform"]["systemPool"], "osSku": "Ubuntu2404"}


def test_the_program_stops_before_azure_is_touched() -> None:
    """The offline plan with the last run's outputs: the skip stops the run; the one-minor step plans."""
    raw = raw_stack("aks")
    raw["platform"].update(kubernetesVersion="1.37.2", gpuPools=_pools("Ubuntu2404"), systemPool=_system())
    monitor = RecordingMonitor(_last("1.35.7"))
    refused = r"platform\.kubernetesVersion: 1\.37\.2, but the last run applied 1\.35\.7"
    with pytest.raises(pulumi.RunError, match=refused):
        run_program("aks", config=qualified(raw), previous=_last("1.35.7"), monitor=monitor)
    sent = {r.type for r in monitor.records}
    assert "azure-native:containerservice:ManagedCluster" not in sent
    assert "azure-native:containerservice:AgentPool" not in sent
    run = run_program("aks", config=qualified(raw), previous=_last("1.36.3"))
    cluster = next(r for r in run.records if r.type == "azure-native:containerservice:ManagedCluster")
    assert cluster.inputs["kubernetesVersion"] == "1.37.2"
    pools = [r for r in run.records if r.type == "azure-native:containerservice:AgentPool"]
    assert pools and all(p.inputs["orchestratorVersion"] == "1.37.2" for p in pools)
    assert run.outputs[guard.OUTPUT] == "1.37.2"


def test_every_stack_records_its_version() -> None:
    assert run_program("aks", config=fixture_config("aks")).outputs[guard.OUTPUT] == versions.AKS_KUBERNETES
    assert (
        run_program("onprem", config=fixture_config("onprem")).outputs[guard.OUTPUT]
        == raw_stack("onprem")["platform"]["kubernetesVersion"]
    )


def test_from_an_unsupported_minor_the_one_jump_is_to_the_oldest_supported() -> None:
    """AKS: 1.33 is past standard support on 2026-12-01; 1.33 -> 1.35 (the oldest supported) passes, 1.36 does not."""
    today = date(2026, 12, 1)
    issues, (warning,) = guard.check(_aks("1.35.7"), _last("1.33.13"), today)
    assert issues == [] and "one jump to the oldest supported minor, 1.35" in warning
    (issue,), _ = guard.check(_aks("1.36.3"), _last("1.33.13"), today)
    assert "go to 1.35 first" in issue.message
    # While 1.33 was still supported, the jump was a skip like any other.
    (issue,), _ = guard.check(_aks("1.35.7"), _last("1.33.13"), date(2026, 7, 1))
    assert "go to 1.34 first" in issue.message
