"""Shared fixtures: stack configs, offline runs of the real program, upstream schema paths."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.loader import gpuaas_section, parse_config
from components.model.config import StackConfig
from components.plan.offline import Run, run_program, stack_config

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
UPSTREAM = SHARED / "upstream"
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


@pytest.fixture
def upstream() -> Path:
    """``../shared/upstream``; tests that need it skip with the reason where it is absent."""
    if not UPSTREAM.is_dir():
        pytest.skip("../shared/upstream is absent: upstream schemas are not available on this machine")
    return UPSTREAM
