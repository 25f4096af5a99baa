"""The proofs measure what they claim: each pair of pods on two distinct nodes of its target's group.

An ib_write_bw or NCCL pair on one node would measure the node's PCIe or NVLink, not the fabric;
an isolation probe's client and server on one node would not cross the switch whose partition table
is the thing proven. On each stack's simulated fleet the plan's proof Jobs run as the controllers
and the real scheduler place them (KWOK keeps their pods Running): each pod of a pair asks for its
team's RDMA resource (on-prem the partition's VF, ``nvidia.com/sriov<P_Key>``; AKS the RDMA shared
device), is Running on a node of the target's group — on AKS the team's pool, on-prem a node
advertising the team's VF — and the two are on different nodes.
"""

from __future__ import annotations

from typing import Final

import pytest

from components.model.teams import AksPartition, OnPremPartition, Team
from e2e.kube import Obj
from e2e.plan_apply import planned_objects
from tests.e2e.conftest import PLACEMENT_SUMMARY, StackFleet
from tests.e2e.fleet_scaling import scale_for
from tests.e2e.kueue_manager import delete_job

STACKS: Final = ("onprem", "aks")
PROOF_LABEL: Final = "app.kubernetes.io/name=gpuaas-verify"


def stack_fleet(request: pytest.FixtureRequest, stack: str) -> StackFleet:
    sf: StackFleet = request.getfixturevalue(f"{stack}_fleet")
    return sf


def team_rdma_resource(sf: StackFleet, team: Team) -> str:
    """The RDMA resource a team's proof pods ask for (README "Teams")."""
    if isinstance(team.partition, OnPremPartition):
        return f"nvidia.com/sriov{int(team.partition.pkey) | 0x8000:04x}"
    net = sf.cfg.network
    return f"{net.rdma_resource_prefix}/{net.rdma_resource_name}"


def team_nodes(sf: StackFleet, team: Team) -> set[str]:
    """Where a team's RDMA proofs may run: its pool (AKS), the nodes with its VFs (on-prem)."""
    if isinstance(team.partition, AksPartition):
        return {s.name for s in sf.specs if s.group == team.partition.node_pool}
    resource = team_rdma_resource(sf, team)
    return {s.name for s in sf.specs if int(s.capacity.get(resource, "0")) > 0}


def _requests(pod: Obj) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in pod["spec"]["containers"]:
        out |= (c.get("resources") or {}).get("requests") or {}
    return out


def _started_again_if_ended(sf: StackFleet, selector: str) -> None:
    """The plan's Jobs of ``selector`` that have ended, created again from the plan, as a re-run
    of the proofs would: each proof Job has an ``activeDeadlineSeconds`` (20 or 30 minutes), and
    the session's fleet may be older than that when this test runs (the Job controller has then
    failed it, DeadlineExceeded, and removed its pods)."""
    kube = sf.kube
    planned = {
        (p.obj["metadata"].get("namespace"), p.obj["metadata"]["name"]): p.obj
        for p in planned_objects(sf.run)
        if p.obj["kind"] == "Job"
    }
    for job in kube.list("batch/v1", "Job", selector=selector):
        ended = {c["type"] for c in job.get("status", {}).get("conditions") or [] if c["status"] == "True"}
        if not ended & {"Failed", "Complete"}:
            continue
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        delete_job(kube, ns, name)
        kube.wait_for(f"Job {ns}/{name} gone", lambda ns=ns, name=name: kube.get("batch/v1", "Job", name, ns) is None)
        kube.create(planned[(ns, name)])


def _unschedulable(pod: Obj) -> bool:
    conds = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds)


def _running_pods(sf: StackFleet, ns: str, selector: str, count: int) -> list[Obj]:
    """The ``count`` pods of ``selector``, once Running; on AKS a pod no node holds makes the
    fleet play the cluster autoscaler (tests/e2e/fleet_scaling.py) for its pool, as AKS would."""
    kube = sf.kube

    def running() -> list[Obj] | None:
        pods = [p for p in kube.list("v1", "Pod", ns, selector=selector) if not p["metadata"].get("deletionTimestamp")]
        if len(pods) == count and all(p.get("status", {}).get("phase") == "Running" for p in pods):
            return pods
        return None

    for _ in range(4):
        try:
            found: list[Obj] = kube.wait_for(f"{count} Running pods {selector} in {ns}", running, timeout=45)
            return found
        except TimeoutError as e:
            pods = kube.list("v1", "Pod", ns, selector=selector)
            stuck = [p for p in pods if _unschedulable(p)]
            if sf.cfg.aks is None or not stuck or any(scale_for(sf, p) is None for p in stuck):
                states = [(p["metadata"]["name"], p["spec"].get("nodeName"), p.get("status", {})) for p in pods]
                raise AssertionError(f"{e}\n{states}") from e
    raise AssertionError(f"{selector} in {ns}: not Running after the pools were scaled")


def _verify_teams(sf: StackFleet) -> list[Team]:
    teams = [t for t in sf.cfg.teams if t.verify and t.partition is not None]
    assert teams, "the stack verifies no team"
    return teams


def _check_pair(sf: StackFleet, what: str, pods: list[Obj], allowed: set[str], resource: str) -> None:
    nodes = [p["spec"]["nodeName"] for p in pods]
    table = f"{what}: pods on {nodes}, the target's nodes {sorted(allowed)}"
    PLACEMENT_SUMMARY.append(f"{sf.run.stack:<7} {what}: {' + '.join(nodes)} (two distinct nodes of {len(allowed)})")
    assert len(set(nodes)) == 2, f"both pods on one node: {table}"
    assert set(nodes) <= allowed, table
    for pod in pods:
        assert int(_requests(pod).get(resource, "0")) >= 1, (pod["metadata"]["name"], _requests(pod), resource)


@pytest.mark.parametrize("stack", STACKS)
def test_each_ib_write_bw_pair_runs_on_two_nodes_of_its_group(request: pytest.FixtureRequest, stack: str) -> None:
    sf = stack_fleet(request, stack)
    for team in _verify_teams(sf):
        _started_again_if_ended(sf, f"{PROOF_LABEL},gpuaas.io/verify-target={team.name}")
        sel = f"{PROOF_LABEL},gpuaas.io/verify-target={team.name},gpuaas.io/verify-pair=ib"
        pods = _running_pods(sf, team.ns, sel, 2)
        roles = sorted(p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods)
        assert roles == ["ib-client", "ib-server"], roles
        _check_pair(sf, f"{team.name} ib_write_bw", pods, team_nodes(sf, team), team_rdma_resource(sf, team))


@pytest.mark.parametrize("stack", STACKS)
def test_each_nccl_pair_runs_on_two_gpu_nodes_of_its_group(request: pytest.FixtureRequest, stack: str) -> None:
    sf = stack_fleet(request, stack)
    whole_gpus = {s.name for s in sf.specs if int(s.capacity.get("nvidia.com/gpu", "0")) > 0}
    for team in _verify_teams(sf):
        _started_again_if_ended(sf, f"{PROOF_LABEL},gpuaas.io/verify-target={team.name}")
        sel = f"{PROOF_LABEL},gpuaas.io/verify-target={team.name},gpuaas.io/verify-pair=nccl"
        pods = _running_pods(sf, team.ns, sel, 2)
        allowed = team_nodes(sf, team) & whole_gpus
        _check_pair(sf, f"{team.name} nccl", pods, allowed, team_rdma_resource(sf, team))
        for pod in pods:
            assert int(_requests(pod).get("nvidia.com/gpu", "0")) >= 1, _requests(pod)


def _probes(sf: StackFleet) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for pod in sf.kube.list("v1", "Pod", selector="gpuaas.io/isolation-probe"):
        out.setdefault(pod["metadata"]["labels"]["gpuaas.io/isolation-probe"], []).append(pod)
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_each_isolation_probe_has_its_client_and_server_on_two_nodes(
    request: pytest.FixtureRequest, stack: str
) -> None:
    sf = stack_fleet(request, stack)
    _started_again_if_ended(sf, "gpuaas.io/isolation-probe")
    jobs = [j for j in sf.kube.list("batch/v1", "Job", selector="gpuaas.io/isolation-probe")]
    assert jobs, "the plan has no isolation probe"
    probes = {j["metadata"]["labels"]["gpuaas.io/isolation-probe"] for j in jobs}
    by_team = {t.name: t for t in sf.cfg.teams}

    def placed() -> dict[str, list[Obj]] | None:
        found = _probes(sf)
        ok = all(
            len(found.get(p, [])) == 2 and all(x.get("status", {}).get("phase") == "Running" for x in found[p])
            for p in probes
        )
        return found if ok else None

    try:
        found: dict[str, list[Obj]] = sf.kube.wait_for("every probe's two pods Running", placed, timeout=120)
    except TimeoutError as e:
        pods = {
            p: [(x["metadata"]["name"], x["spec"].get("nodeName"), x.get("status")) for x in v]
            for p, v in _probes(sf).items()
        }
        states = {j["metadata"]["name"]: (j["spec"].get("suspend"), j.get("status")) for j in jobs}
        raise AssertionError(f"{e}\njobs: {states}\npods: {pods}") from e
    for probe in sorted(probes):
        pods = found[probe]
        roles = {p["metadata"]["labels"].get("gpuaas.io/isolation-role", "client"): p for p in pods}
        assert set(roles) == {"client", "server"}, [p["metadata"]["labels"] for p in pods]
        nodes = {r: p["spec"]["nodeName"] for r, p in roles.items()}
        PLACEMENT_SUMMARY.append(f"{stack:<7} isolation {probe}: client {nodes['client']}, server {nodes['server']}")
        assert nodes["client"] != nodes["server"], (probe, nodes)
        for role, pod in roles.items():
            team = by_team[pod["metadata"]["namespace"]]
            assert pod["spec"]["nodeName"] in team_nodes(sf, team), (probe, role, nodes)
            assert int(_requests(pod).get(team_rdma_resource(sf, team), "0")) >= 1, (probe, role, _requests(pod))
