"""Shared fixtures: stack configs, offline runs of the real program, the upstream fixtures folder;
and the hooks that keep a run from passing by not running (``tests/run_guards.py``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
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
from components.plan.offline import Run, run_program, stack_config
from e2e.upstream import CheckedPath
from tests import run_guards

ROOT = Path(__file__).resolve().parent.parent
STACKS = ("onprem", "aks")


def raw_stack(stack: str) -> dict[str, Any]:
    """The ``gpuaas:*`` keys of a checked-in stack file, prefix stripped (a deep copy)."""
    return copy.deepcopy(gpuaas_section(stack_config(stack)))


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
    """The checked-in stack run once per test session (runs are deterministic)."""
    if stack not in _RUNS:
        _RUNS[stack] = run_program(stack)
    return _RUNS[stack]


@pytest.fixture
def run_of() -> Callable[[str], Run]:
    return offline_run


def last_outputs(stack: str, **overrides: Any) -> dict[str, Any]:
    """What the checked-in stack's last run exported, as its plan's outputs.yaml holds them (the day-2
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
