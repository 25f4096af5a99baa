"""The DRA model placed: a team's claim is allocated by the real scheduler from the devices its class means.

The on-prem DRA variant (tests/stacks/onprem-dra.yaml) on a simulated fleet: every GPU node
publishes the NVIDIA DRA driver's ResourceSlice as the oracle writes it (tests/e2e/fleet_nodes.py:
a device per whole GPU, ``type: gpu``; per MIG device, ``type: mig`` with its ``profile``), the
DeviceClasses the GPUCluster controller would create are stood up, and the plan adds gpuaas's
per-profile MIG classes and the teams' claim templates. A pod that names its team's template gets a
claim of its own, which kube-scheduler's DRA plugin allocates on a node whose slice has a device
the class selects: a whole GPU on an h100-full node, a ``1g.10gb`` on a node whose layout makes
one, never a device of another class; a claim no node's devices can satisfy leaves its pod Pending.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from components.dra import claims
from components.loader import gpuaas_section, parse_config
from components.model import dra
from components.plan.offline import run_program, stack_config
from e2e.fleet import Fleet, play_operators
from e2e.kube import Identity, Obj
from tests.e2e.conftest import PLACEMENT_SUMMARY, StackFleet, need_upstream
from tests.e2e.fleet_nodes import fleet_nodes, resource_slice
from tests.e2e.jobs import PAUSE
from tests.e2e.settle import gone
from tests.e2e.test_dra_quota_and_claim_guard_hold import DRA_STACK, driver_device_classes


@pytest.fixture(scope="module")
def dra_fleet(pytestconfig: pytest.Config) -> Iterator[StackFleet]:
    need_upstream()
    config = stack_config("onprem", DRA_STACK)
    cfg = parse_config(gpuaas_section(config))
    run = run_program("onprem", config=config)
    specs = fleet_nodes(cfg)
    fleet = Fleet.start([s.manifest() for s in specs])
    try:
        for device_class in driver_device_classes():
            fleet.kube.apply(device_class, manager="nvidia-gpu-operator")
        fleet.apply(run)
        play_operators(fleet.kube, cfg.network.namespace)
        fleet.publish([s for spec in specs if (s := resource_slice(spec)) is not None], manager="nvidia-dra-driver")
        yield StackFleet(fleet, cfg, specs, run)
    finally:
        fleet.stop()


def member(sf: StackFleet, team: str) -> Identity:
    t = next(x for x in sf.cfg.teams if x.name == team)
    return Identity(f"member-of-{team}@example.com", tuple(t.groups))


def claiming_pod(ns: str, name: str, device_class: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": PAUSE,
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claims.template_name(device_class)}],
        },
    }


def _allocation(sf: StackFleet, ns: str, pod: str) -> tuple[str, list[dict[str, Any]]]:
    kube = sf.kube

    def placed() -> tuple[str, list[dict[str, Any]]] | None:
        p = kube.get("v1", "Pod", pod, ns) or {}
        statuses = p.get("status", {}).get("resourceClaimStatuses") or []
        if p.get("status", {}).get("phase") != "Running" or not statuses:
            return None
        claim = kube.get("resource.k8s.io/v1", "ResourceClaim", statuses[0]["resourceClaimName"], ns) or {}
        results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results") or []
        return (p["spec"]["nodeName"], results) if results else None

    try:
        got: tuple[str, list[dict[str, Any]]] = kube.wait_for(f"{ns}/{pod} allocated and Running", placed, 120)
    except TimeoutError as e:
        raise AssertionError(f"{e}: {kube.get('v1', 'Pod', pod, ns)}") from e
    return got


def _device(sf: StackFleet, node: str, name: str) -> dict[str, Any]:
    spec = next(s for s in sf.specs if s.name == node)
    slice_ = resource_slice(spec) or {}
    found: dict[str, Any] = next(d for d in slice_["spec"]["devices"] if d["name"] == name)
    return found


@pytest.mark.parametrize(
    ("team", "device_class", "want"),
    [
        ("vision", dra.GPU_CLASS, {"type": "gpu"}),
        ("research", dra.mig_class("1g.10gb"), {"type": "mig", "profile": "1g.10gb"}),
        ("research", dra.mig_class("4g.40gb"), {"type": "mig", "profile": "4g.40gb"}),
    ],
)
def test_a_claim_is_allocated_a_device_of_its_class_on_a_node_that_has_one(
    dra_fleet: StackFleet, team: str, device_class: str, want: dict[str, str]
) -> None:
    sf, kube = dra_fleet, dra_fleet.kube
    name = f"claim-{device_class.split('.')[0]}"
    kube.create(claiming_pod(team, name, device_class), as_=member(sf, team))
    try:
        node, results = _allocation(sf, team, name)
        (result,) = results
        assert result["driver"] == dra.DRIVER and result["pool"] == node, result
        attrs = {k: next(iter(v.values())) for k, v in _device(sf, node, result["device"])["attributes"].items()}
        assert {k: attrs.get(k) for k in want} == want, (device_class, node, result, attrs)
        having = {
            s.name for s in sf.specs if (want["type"] == "gpu" and s.gpus and not s.mig) or want.get("profile") in s.mig
        }
        assert node in having, (node, sorted(having))
        PLACEMENT_SUMMARY.append(f"onprem-dra {team} {device_class}: {result['device']} on {node} of {sorted(having)}")
    finally:
        gone(kube, "v1", "Pod", name, team)  # its generated claim with it: the next case claims again


def test_a_claim_no_nodes_devices_satisfy_stays_pending(dra_fleet: StackFleet) -> None:
    """vision may claim whole GPUs; one pod asking for more whole GPUs than any node has (9 in one
    claim) is not placed: the scheduler's DRA plugin finds no node with the devices."""
    sf, kube = dra_fleet, dra_fleet.kube
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "nine", "namespace": "vision"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": dra.GPU_CLASS, "count": 9}}]}},
    }
    kube.create(claim, as_=member(sf, "vision"))
    pod = claiming_pod("vision", "nine", dra.GPU_CLASS)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "nine"}]
    try:
        kube.create(pod, as_=member(sf, "vision"))

        def unschedulable() -> str | None:
            p = kube.get("v1", "Pod", "nine", "vision") or {}
            for c in p.get("status", {}).get("conditions") or []:
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                    return str(c.get("message", ""))
            return None

        message = kube.wait_for("the pod unschedulable", unschedulable, 90)
        assert "cannot allocate all claims" in message or "resourceclaim" in message.lower(), message
    finally:
        gone(kube, "v1", "Pod", "nine", "vision")
        gone(kube, "resource.k8s.io/v1", "ResourceClaim", "nine", "vision")
