"""The offline runner's shortcuts (components/plan/offline.py) change no byte of the plan.

``run_program`` pauses the cyclic GC and skips the SDK's stack capture for speed
(benchmarks/plan_scale.py, BENCHMARKS.md). These tests run the same program both ways, the fast
path and the SDK's default path, and compare every plan file and every record: the shortcuts may
only ever change how long a plan takes.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pulumi
import pytest

from components.plan.offline import ROOT, Record, gc_paused, run_program
from components.plan.writer import plan_files
from tests.conftest import fixture_config


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_scale", ROOT / "benchmarks" / "plan_scale.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["plan_scale"] = mod
    spec.loader.exec_module(mod)
    return mod


def _key(r: Record) -> tuple[Any, ...]:
    return (r.urn, r.type, r.custom, r.inputs, r.parent, r.dependencies, r.provider, r.protect,
            r.ignore_changes, r.delete_before_replace, r.retain_on_delete, r.secret_outputs)  # fmt: skip


@pytest.fixture(params=["onprem", "aks", "synthetic"])
def config(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    if request.param == "synthetic":
        # Mid-size: every component at fleet shape (4 node groups, partitions, many teams) in a few seconds.
        yield "bench", _bench().synthetic_config(48, 24, 6)
    else:
        yield request.param, fixture_config(request.param)


def test_fast_plan_is_byte_identical_to_the_sdk_default_path(config: tuple[str, dict[str, Any]]) -> None:
    stack, cfg = config
    fast = run_program(stack, config=cfg)
    slow = run_program(stack, config=cfg, fast=False)
    assert plan_files(fast) == plan_files(slow)
    # Beyond the files: the same registrations (inputs, parents, dependencies, options), outputs and secrets.
    assert sorted(map(_key, fast.records)) == sorted(map(_key, slow.records))
    assert len(fast.records) == len(slow.records) > 10
    assert fast.outputs == slow.outputs and fast.secret_outputs == slow.secret_outputs


def test_the_run_pauses_the_cyclic_gc_and_restores_it() -> None:
    seen: list[bool] = []

    def program() -> None:
        seen.append(gc.isenabled())
        pulumi.export("x", "y")

    assert gc.isenabled()
    run_program("onprem", config=fixture_config("onprem"), program=program)
    run_program("onprem", config=fixture_config("onprem"), program=program, fast=False)
    assert seen == [False, True]
    assert gc.isenabled()


def test_gc_paused_restores_the_callers_state_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_gc_paused_freezes_the_runs_heap_before_collection_resumes() -> None:
    # Issue 37: without the freeze, the first young collection after the pause walks the whole run.
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    with gc_paused():
        kept = [[i] for i in range(1000)]
        assert gc.get_freeze_count() == 0  # nothing frozen while the run goes on
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_count()[0] < len(kept)  # the young generation no longer holds the run
    gc.unfreeze()


def test_a_nested_pause_leaves_freezing_to_the_one_that_resumes_collection() -> None:
    gc.unfreeze()
    with gc_paused():
        with gc_paused():
            kept = [[i] for i in range(1000)]
        assert gc.get_freeze_count() == 0 and not gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)
    gc.unfreeze()
