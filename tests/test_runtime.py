"""The program's collector tuning (components/runtime.py): what it sets, what it leaves, that the program applies it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pulumi
import pytest

from components.plan.offline import run_program
from components.runtime import tune_collector

DEFAULTS = (700, 10, 10)  # CPython's own (Modules/gcmodule.c), what a fresh interpreter starts with


@pytest.fixture(autouse=True)
def restore_thresholds() -> Iterator[None]:
    saved, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*saved)
    (gc.enable if enabled else gc.disable)()


def test_the_defaults_are_raised_and_the_old_ones_returned() -> None:
    gc.set_threshold(*DEFAULTS)
    assert tune_collector() == DEFAULTS
    assert gc.get_threshold() == (100_000, 50, 100)


def test_a_higher_threshold_a_caller_set_is_kept() -> None:
    gc.set_threshold(250_000, 10, 500)
    tune_collector()
    assert gc.get_threshold() == (250_000, 50, 500)


def test_collection_stays_as_it_was() -> None:
    gc.disable()
    tune_collector()
    assert not gc.isenabled()
    gc.enable()
    tune_collector()
    assert gc.isenabled()


def test_the_program_tunes_its_collector_and_the_harness_does_not() -> None:
    gc.set_threshold(*DEFAULTS)
    run_program("onprem", program=lambda: pulumi.export("x", "y"))  # the harness alone: untouched
    assert gc.get_threshold() == DEFAULTS
    run_program("onprem")  # __main__.py
    assert gc.get_threshold() == (100_000, 50, 100)
