"""The fleet with Kueue: Kueue's own manager against a stack's simulated fleet, and what its tests share.

:func:`start` brings up one stack's fleet (tests/e2e/fleet_nodes.py's nodes, kube-scheduler, KWOK),
applies the plan of a variant with elastic quotas, plays the operators, and starts Kueue's manager
(v0.19.2, as tests/e2e/test_elastic_quotas_lend_and_reclaim.py runs it) with the Configuration
gpuaas renders for that stack. tests/e2e/conftest.py makes one per stack per session
(``onprem_kueue``, ``aks_kueue``): the Kueue tests and the fault tests share them.

The variants: onprem is tests/stacks/onprem.yaml (elastic on) with the burn-in CronJobs on; AKS is
tests/stacks/aks-elastic.yaml where it exists (the tenancy fix's variant), else tests/stacks/aks.yaml with
``queues.elastic`` on.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final

import pytest

from components import platform_args
from components.loader import gpuaas_section, parse_config
from components.model.config import StackConfig
from components.model.teams import Team
from components.plan.offline import Run, run_program, stack_config
from components.queueing import queues
from components.queueing.admission import PRIORITY_LABEL, QUEUE_LABEL
from e2e import toolchain
from e2e.fleet import Fleet
from e2e.kube import Identity, Kube, Obj
from e2e.plan_apply import apply_plan, install_crds
from tests.conftest import fixture_config
from tests.e2e.conftest import StackFleet, need_upstream, play_operators
from tests.e2e.fleet_nodes import NodeSpec, fleet_nodes
from tests.e2e.jobs import queued_job
from tests.e2e.kueue_manager import Kueue, admitted, delete_job, kueue_crds, workload_of

__all__ = ["PRIORITY_LABEL", "admitted", "workload_of"]

ROOT: Final = Path(__file__).resolve().parents[2]
KUEUE_API: Final = queues.API
#: The AKS variant with queues (the tenancy fix's stack file); built from tests/stacks/aks.yaml where absent.
AKS_ELASTIC: Final = ROOT / "tests" / "stacks" / "aks-elastic.yaml"
BURN_IN_CLASS: Final = "gpuaas-burn-in"


def onprem_config() -> dict[str, Any]:
    """tests/stacks/onprem.yaml (elastic on) with the burn-in CronJobs on."""
    config = copy.deepcopy(fixture_config("onprem"))
    config.setdefault("gpuaas:verification", {})["burnIn"] = {"enabled": True}
    return config


def aks_config() -> dict[str, Any]:
    if AKS_ELASTIC.is_file():
        return stack_config("aks", AKS_ELASTIC)
    config = copy.deepcopy(fixture_config("aks"))
    config["gpuaas:queues"] = {"elastic": True}
    return config


class FleetKueue(Kueue):
    """The Kueue manager with the Configuration gpuaas renders for ``cfg`` (not only onprem's)."""

    def __init__(self, fleet: Fleet, workdir: Path, cfg: StackConfig) -> None:
        super().__init__(fleet.cp, workdir, cfg)

    def configuration(self) -> dict[str, Any]:
        local = super().configuration()  # what a process outside a cluster needs (loopback, no HA)
        conf = queues.kueue_configuration(platform_args.queues(self.cfg))
        conf.update({k: local[k] for k in ("leaderElection", "health", "metrics", "webhook", "featureGates")})
        return conf


class KueueFleet(StackFleet):
    def __init__(self, fleet: Fleet, cfg: StackConfig, specs: list[NodeSpec], run: Run, manager: FleetKueue) -> None:
        super().__init__(fleet, cfg, specs, run)
        self.manager = manager


def condition(obj: Obj | None, kind: str) -> str | None:
    for c in (obj or {}).get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def _active(kube: Kube, name: str) -> bool:
    return condition(kube.get(KUEUE_API, "ClusterQueue", name), "Active") == "True"


def start(pytestconfig: pytest.Config, stack: str, config: dict[str, Any]) -> Iterator[KueueFleet]:
    need_upstream()
    cfg = parse_config(gpuaas_section(config))
    assert cfg.queues.elastic, f"{stack}: the variant has no elastic quotas"
    run = run_program(stack, config=config)
    bin_dir = toolchain.build(toolchain.TOOLSETS["kueue"])
    specs = fleet_nodes(cfg)
    fleet = Fleet.start([s.manifest() for s in specs])
    workdir = Path(tempfile.mkdtemp(prefix="gpuaas-kueue-fleet-"))
    manager = FleetKueue(fleet, workdir, cfg)
    try:
        kube = fleet.kube
        install_crds(kube, kueue_crds(manager.webhook_port))
        fleet.applied = apply_plan(kube, run)
        play_operators(kube, cfg)
        # The plan's proof Jobs go through the teams' queues too; the scenarios count from zero.
        for team in cfg.teams:
            for j in kube.list("batch/v1", "Job", team.ns, selector=QUEUE_LABEL):
                delete_job(kube, team.ns, j["metadata"]["name"])
        manager.start(bin_dir)
        try:
            kube.wait_for("the cert rotator's Secret", manager.mount_certs, timeout=60)
            kube.wait_for("Kueue /readyz", manager.ready, timeout=180)
            for team in cfg.teams:
                kube.wait_for(f"ClusterQueue {team.name} active", partial(_active, kube, team.name), timeout=120)
        except (TimeoutError, RuntimeError) as e:
            raise AssertionError(f"{e}\n--- kueue log ---\n{manager.tail()}") from e
        yield KueueFleet(fleet, cfg, specs, run, manager)
    finally:
        manager.stop()
        fleet.stop()


def member(team: Team) -> Identity:
    return Identity(f"member-of-{team.name}@example.com", tuple(team.groups))


def team_job(
    team: Team, name: str, limits: dict[str, str], *, priority: str | None = None, parallelism: int = 1
) -> Obj:
    """A training Job as a team member writes it for Kueue: suspended, its queue named; its pods
    keep running (no e2e outcome annotation) until the test deletes the Job."""
    return queued_job(
        team.ns, name, team.name, limits, priority=priority, parallelism=parallelism, cpu="1", memory="1Gi"
    )


def job_pods(kube: Kube, ns: str, job: str) -> list[Obj]:
    return [
        p
        for p in kube.list("v1", "Pod", ns, selector=f"batch.kubernetes.io/job-name={job}")
        if not p["metadata"].get("deletionTimestamp")
    ]


def refusals(kube: Kube, ns: str, job: str) -> list[str]:
    """The Job controller's FailedCreate events for ``job``: the API server's refusals of its pods."""
    return [
        e["message"]
        for e in kube.list("v1", "Event", ns)
        if e["involvedObject"].get("name") == job and e.get("reason") == "FailedCreate"
    ]


def wait_running(kf: KueueFleet, team: Team, job: str, pods: int = 1, timeout: float = 120) -> list[Obj]:
    kube = kf.kube

    def running() -> list[Obj] | None:
        refused = refusals(kube, team.ns, job)
        if refused:
            raise AssertionError(f"{team.ns}/{job}: Kueue admitted it, the API server refused its pods: {refused[0]}")
        found = job_pods(kube, team.ns, job)
        ok = len(found) == pods and all(p.get("status", {}).get("phase") == "Running" for p in found)
        return found if ok else None

    try:
        got: list[Obj] = kube.wait_for(f"{team.ns}/{job}: {pods} pods Running", running, timeout=timeout)
    except TimeoutError as e:
        left = job_pods(kube, team.ns, job)
        states = [(p["metadata"]["name"], p["spec"].get("nodeName"), p.get("status", {})) for p in left]
        raise AssertionError(f"{e}\nrefused: {refusals(kube, team.ns, job)}\npods: {states}") from e
    return got


def flavor_nodes(kf: KueueFleet, flavor: str, resource: str) -> set[str]:
    """Nodes a pod admitted to ``flavor`` for ``resource`` may run on: the flavor's nodeLabels and
    the resource on the node (the oracle's capacity)."""
    rf = kf.kube.get(KUEUE_API, "ResourceFlavor", flavor) or {}
    want = rf.get("spec", {}).get("nodeLabels") or {}
    return {
        s.name
        for s in kf.specs
        if all(s.labels_after_plan.get(k) == v for k, v in want.items()) and int(s.capacity.get(resource, "0")) > 0
    }


def no_pods(kube: Kube, ns: str, name: str) -> bool:
    return not job_pods(kube, ns, name)


def _left(kube: Kube, ns: str, name: str) -> bool:
    return bool(kube.get("batch/v1", "Job", name, ns) or job_pods(kube, ns, name) or workload_of(kube, ns, name))


def cleanup(kf: KueueFleet, jobs: list[tuple[Team, str]]) -> None:
    kube = kf.kube
    for team, name in jobs:
        delete_job(kube, team.ns, name)
    kube.wait_for(
        "the test's Jobs, Workloads and pods gone",
        lambda: not any(_left(kube, t.ns, n) for t, n in jobs),
        timeout=120,
    )
