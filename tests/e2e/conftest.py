"""The real control plane for the e2e tests: one per session, plus one per stack's applied plan.

Every test under ``tests/e2e`` is marked ``e2e`` (``make unit`` leaves them out, ``make e2e``
runs only them; ``make test`` runs both). The control plane is Kubernetes ``$GPUAAS_E2E_KUBERNETES``
(``make e2e KUBERNETES=1.35``; default the newest supported minor); ``make e2e`` runs the whole
suite on the newest and the tests marked ``every_minor`` (plan apply, isolation, quota, the engine) on the
oldest too. The binaries come from ``e2e/toolchain.py`` (built from
Go modules, cached by version); ``make e2e-tools`` builds them before pytest starts, so a cold
build prints its progress instead of hiding inside a fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.plan.offline import Run
from e2e import cni
from e2e.controlplane import ControlPlane
from e2e.fleet import Fleet
from e2e.fleet import play_operators as fleet_play_operators
from e2e.kube import ApiError, Identity, Kube
from e2e.plan_apply import Applied, apply_plan
from tests import run_guards
from tests.conftest import offline_run, raw_stack
from tests.e2e.fleet_nodes import NodeSpec, fleet_nodes

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)


#: One line per placement table the fleet tests checked, printed at the end of the run.
PLACEMENT_SUMMARY: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if PLACEMENT_SUMMARY:
        terminalreporter.section("fleet placement (expected nodes from config = scheduled nodes)")
        for line in PLACEMENT_SUMMARY:
            terminalreporter.write_line(line)


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


def start_plane(config: pytest.Config, what: str) -> ControlPlane:
    cp = ControlPlane()
    cp.start()
    _say(config, f"e2e: {what}: kube-apiserver {cp.version()} at {cp.server} (started in {cp.started_in:.1f} s)")
    return cp


@pytest.fixture(scope="session")
def control_plane(pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    """A bare control plane (no plan applied) for tests that build their own objects."""
    cp = start_plane(pytestconfig, "bare control plane")
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def cni_tools() -> Path:
    """The node-side programs (e2e/cni): Multus' thin plugin and ib-sriov-cni from
    ../shared/upstream/src, the harness, the stand-in delegate. A missing upstream folder fails the
    test, naming it (a skip only under GPUAAS_WITHOUT_UPSTREAM=1, which the run's last line reports)."""
    run_guards.need_upstream("src")
    try:
        return cni.bin_dir()
    except SystemExit as e:
        pytest.fail(str(e), pytrace=False)


def need_upstream() -> None:
    """The upstream folder is there (a failure naming it and its variable otherwise; a skip only
    under GPUAAS_WITHOUT_UPSTREAM=1, which the run's last line reports)."""
    run_guards.need_upstream()


class AppliedStack:
    """A control plane with one stack's offline plan applied, in install order."""

    def __init__(self, cp: ControlPlane, run: Run, applied: list[Applied]) -> None:
        self.cp, self.run, self.applied = cp, run, applied

    @property
    def kube(self) -> Kube:
        return self.cp.kube


def _applied(pytestconfig: pytest.Config, stack: str) -> Iterator[AppliedStack]:
    need_upstream()
    cp = start_plane(pytestconfig, f"{stack} plan")
    try:
        run = offline_run(stack)
        applied = apply_plan(cp.kube, run)
        _say(pytestconfig, f"e2e: {stack}: {len(applied)} objects applied")
        yield AppliedStack(cp, run, applied)
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def onprem(pytestconfig: pytest.Config) -> Iterator[AppliedStack]:
    yield from _applied(pytestconfig, "onprem")


@pytest.fixture(scope="session")
def aks(pytestconfig: pytest.Config) -> Iterator[AppliedStack]:
    yield from _applied(pytestconfig, "aks")


def wait_until_refused(kube: Kube, obj: dict[str, Any], who: Identity | None, text: str, timeout: float = 60) -> None:
    """Wait until the server refuses ``obj`` with ``text``: admission policies take effect a moment
    after they are stored (the API server loads and type-checks them asynchronously)."""

    def refused() -> bool:
        try:
            kube.create(obj, as_=who, dry_run=True)
        except ApiError as e:
            return text in e.message
        return False

    kube.wait_for(f"the server refuses {obj['kind']} {obj['metadata'].get('name')} with {text!r}", refused, timeout)


# --------------------------------------------------------------------------------------------
# The simulated fleet: kube-scheduler, KWOK nodes of the stack (tests/e2e/fleet_nodes.py), its plan


class StackFleet:
    """One stack's fleet: the parsed config, the node oracle, the plan applied to KWOK nodes."""

    def __init__(self, fleet: Fleet, cfg: StackConfig, specs: list[NodeSpec], run: Run) -> None:
        self.fleet, self.cfg, self.specs, self.run = fleet, cfg, specs, run

    @property
    def kube(self) -> Kube:
        return self.fleet.kube

    @property
    def cp(self) -> ControlPlane:
        return self.fleet.cp


def play_operators(kube: Kube, cfg: StackConfig) -> None:
    """What the operators create and our objects use (e2e/fleet.py: they cannot run here)."""
    fleet_play_operators(kube, cfg.network.namespace)


def start_fleet(
    config: pytest.Config, stack: str, cfg: StackConfig, run: Run, per_pool: dict[str, int] | None = None
) -> StackFleet:
    need_upstream()
    specs = fleet_nodes(cfg, per_pool)
    fleet = Fleet.start([s.manifest() for s in specs])
    try:
        fleet.apply(run)
        play_operators(fleet.kube, cfg)
    except BaseException:
        fleet.stop()
        raise
    _say(
        config,
        f"e2e: {stack} fleet: kube-apiserver {fleet.cp.version()}, {len(specs)} KWOK nodes ready in "
        f"{fleet.nodes_ready_in:.1f} s, {len(fleet.applied)} objects applied",
    )
    return StackFleet(fleet, cfg, specs, run)


@pytest.fixture(scope="session")
def onprem_fleet(pytestconfig: pytest.Config) -> Iterator[StackFleet]:
    """The onprem stack's plan on its simulated fleet (shared by the session's fleet tests)."""
    sf = start_fleet(pytestconfig, "onprem", parse_config(raw_stack("onprem")), offline_run("onprem"))
    try:
        yield sf
    finally:
        sf.fleet.stop()


@pytest.fixture(scope="session")
def aks_fleet(pytestconfig: pytest.Config) -> Iterator[StackFleet]:
    """The AKS stack's Kubernetes objects on its simulated fleet: one node per pool (they scale from 0)."""
    sf = start_fleet(pytestconfig, "aks", parse_config(raw_stack("aks")), offline_run("aks"))
    try:
        yield sf
    finally:
        sf.fleet.stop()


# The fleets with Kueue's manager (tests/e2e/fleet_kueue.py), one per stack per session: the Kueue
# placement tests and the fault tests share them. Imported here, in the fixture, because
# fleet_kueue builds on this conftest (StackFleet) and on the elastic test's Kueue runner.


@pytest.fixture(scope="session")
def onprem_kueue(pytestconfig: pytest.Config) -> Iterator[Any]:
    from tests.e2e import fleet_kueue

    yield from fleet_kueue.start(pytestconfig, "onprem", fleet_kueue.onprem_config())


@pytest.fixture(scope="session")
def aks_kueue(pytestconfig: pytest.Config) -> Iterator[Any]:
    from tests.e2e import fleet_kueue

    yield from fleet_kueue.start(pytestconfig, "aks", fleet_kueue.aks_config())
