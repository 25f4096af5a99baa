"""Stack variants the observability tests share."""

from __future__ import annotations

from typing import Any

from components.loader import gpuaas_section
from components.plan.offline import ROOT, stack_config
from tests.conftest import raw_stack


def observed(stack: str, **observability: Any) -> dict[str, Any]:
    """The checked-in stack's raw config with monitoring on (and ``observability`` keys set)."""
    raw = raw_stack(stack)
    raw["observability"] = {**raw.get("observability", {}), "enabled": True, **observability}
    return raw


def sm_in_cluster() -> dict[str, Any]:
    """On-prem with OpenSM run in the cluster on its first node (``fabric.opensm.deployInCluster``)."""
    raw = observed("onprem")
    platform = raw["platform"]
    platform["fabric"]["opensm"] = {**platform["fabric"]["opensm"], "deployInCluster": True}
    platform["fabric"]["opensm"]["node"] = platform["nodes"][0]["name"]
    return raw


def dra_observed() -> dict[str, Any]:
    """The DRA resource model's test stack (tests/stacks/onprem-dra.yaml) with monitoring on."""
    raw = gpuaas_section(stack_config("onprem", ROOT / "tests" / "stacks" / "onprem-dra.yaml"))
    raw["observability"] = {**raw.get("observability", {}), "enabled": True}
    return raw
