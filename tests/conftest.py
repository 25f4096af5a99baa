"""Shared fixtures: stack configs, offline runs of the real program, the upstream fixtures folder;
and the hooks that keep a run from passing by not running (``tests/run_guards.py``)."""

from __future__ import annotations

import copy
import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Imported before any test module: hypothesis' pytest plugin otherwise imports hypothesis late,
# after assertion rewriting has begun, and CPython 3.11.7 then stops the session with "AST
# constructor recursion depth mismatch" after the first passing files (issue #21, item 21;
# `pytest tests/guards/test_mig_guard.py tests/clusters/test_onprem_nodes.py` showed it).
import hypothesis  # noqa: F401
import pytest

from components.loader import gpuaas_section, parse_config
from components.model.config import StackConfig
from components.plan import offline, writer
from components.plan.offline import Run, run_program, stack_config
from e2e.upstream import CheckedPath
from tests import run_guards

ROOT = Path(__file__).resolve().parent.parent
#: The tests' own stack files, ``tests/stacks/<stack>.yaml``. The root ``Pulumi.*.yaml`` are examples
#: a platform team replaces with its own clusters: only tests/test_stacks.py reads them (every one,
#: whatever it holds); every expectation about a particular cluster is about these files.
STACKS_DIR = ROOT / "tests" / "stacks"
STACKS = ("onprem", "aks")


def stack_path(stack: str) -> Path:
    """The tests' own file of ``stack`` (``onprem``, ``aks`` or a variant such as ``onprem-dra``)."""
    return STACKS_DIR / f"{stack}.yaml"


def fixture_config(stack: str) -> dict[str, Any]:
    """The ``config:`` map of the tests' own ``tests/stacks/<stack>.yaml`` (fully qualified keys)."""
    return stack_config(stack, stack_path(stack))


def raw_stack(stack: str) -> dict[str, Any]:
    """The ``gpuaas:*`` keys of the tests' own stack file, prefix stripped (a deep copy)."""
    return copy.deepcopy(gpuaas_section(fixture_config(stack)))


_ROOT_STACK_FILE = offline.stack_file


def _refuse_root_stack(stack: str) -> Path:
    raise AssertionError(
        f"a test read the root Pulumi.{stack}.yaml by its name: the root stacks are examples a platform team "
        f"replaces with its own, so a test plans its own tests/stacks/{stack}.yaml (tests/conftest.py: "
        "fixture_config, stack_path, offline_run); only tests/test_stacks.py reads the root stacks, every one"
    )


# From the first import on (module constants of test modules included), a stack named without its
# file is refused in this process: only the tests marked ``root_stacks`` get the name back (below).
offline.stack_file = _refuse_root_stack


@pytest.fixture(autouse=True)
def _own_stacks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root stacks only for tests marked ``root_stacks``; for the others a stack's "own file", which
    the plan tool compares a ``--stack-file``'s platform kind with, is the tests' own file."""
    if request.node.get_closest_marker("root_stacks") is not None:
        monkeypatch.setattr(offline, "stack_file", _ROOT_STACK_FILE)
    else:
        monkeypatch.setattr(writer, "own_file", stack_path)


@pytest.fixture(autouse=True)
def _thaw() -> Iterator[None]:
    """A run freezes what it leaves alive (components/plan/offline.py ``gc_paused``); this process
    lives on, so after each test its garbage becomes collectable again."""
    yield
    gc.unfreeze()


def qualified(raw: dict[str, Any]) -> dict[str, Any]:
    """Back to fully qualified Pulumi config keys."""
    return {f"gpuaas:{k}": v for k, v in raw.items()}


@pytest.fixture
def raw() -> Callable[[str], dict[str, Any]]:
    return raw_stack


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def cfg_of() -> Callable[[str], StackConfig]:
    return lambda s: parse_config(raw_stack(s))


_RUNS: dict[str, Run] = {}


def offline_run(stack: str) -> Run:
    """The tests' own stack run once per test session (runs are deterministic)."""
    if stack not in _RUNS:
        _RUNS[stack] = run_program(stack, config=fixture_config(stack))
    return _RUNS[stack]


@pytest.fixture
def run_of() -> Callable[[str], Run]:
    return offline_run


def last_outputs(stack: str, **overrides: Any) -> dict[str, Any]:
    """What the tests' own stack's last run exported, as its plan's outputs.yaml holds them (the day-2
    guards' view, secrets masked), with ``overrides``: a ``--previous`` file for the guard tests."""
    run = offline_run(stack)
    shown = {k: ("[secret]" if k in run.secret_outputs else v) for k, v in run.outputs.items()}
    return {**copy.deepcopy(shown), **overrides}


@pytest.fixture
def upstream() -> CheckedPath:
    """The upstream fixtures folder (``$GPUAAS_UPSTREAM``, default ``../shared/upstream``); every path
    formed from it is checked against the folder's blob ids. Absent, the test fails naming the folder
    and the variable; it skips only under ``GPUAAS_WITHOUT_UPSTREAM=1``."""
    return run_guards.need_upstream()


# --------------------------------------------------------------------------------------------
# Hooks: no run passes by not running (tests/run_guards.py says what each one promises).

_TALLY = run_guards.Tally()


def pytest_configure(config: pytest.Config) -> None:
    run_guards.gate()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TALLY.record(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _TALLY.finish(session)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _TALLY.summary(terminalreporter)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    line = _TALLY.last_line()
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None:
        reporter.write_line(line, bold=True)
