"""components/runtime.py: the collector's thresholds and the SDK's debug messages, and that the program applies both."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pulumi
import pytest

from components.plan.offline import run_program
from components.runtime import SDK_DEBUG_ENV, drop_sdk_debug, tune_collector
from tests.conftest import fixture_config

DEFAULTS = (700, 10, 10)  # CPython's own (Modules/gcmodule.c), what a fresh interpreter starts with


@pytest.fixture(autouse=True)
def restore_thresholds() -> Iterator[None]:
    saved, enabled, debug = gc.get_threshold(), gc.isenabled(), pulumi.log.debug
    yield
    gc.set_threshold(*saved)
    (gc.enable if enabled else gc.disable)()
    pulumi.log.debug = debug


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
    run_program(
        "onprem", config=fixture_config("onprem"), program=lambda: pulumi.export("x", "y")
    )  # the harness alone: untouched
    assert gc.get_threshold() == DEFAULTS
    run_program("onprem", config=fixture_config("onprem"))  # __main__.py
    assert gc.get_threshold() == (100_000, 50, 100)


#: What the SDK's register_resource sends at debug level for every resource (pulumi/runtime/resource.py).
REGISTERING = "registering resource: ty=kubernetes:core/v1:Namespace"


def _debug_lines(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, value: str | None) -> list[str]:
    """The debug messages the mock engine got in a run of the program (it logs each to Python's logging)."""
    if value is None:
        monkeypatch.delenv(SDK_DEBUG_ENV, raising=False)
    else:
        monkeypatch.setenv(SDK_DEBUG_ENV, value)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        run_program("onprem", config=fixture_config("onprem"))
    return [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]


def test_the_program_drops_the_sdks_debug_messages_unless_asked(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for value in ("1", "true", "TRUE"):  # asked: every registration's messages reach the engine
        assert any(m.startswith(REGISTERING) for m in _debug_lines(caplog, monkeypatch, value)), value
    # not asked: none after the program starts (the SDK registers the root Stack before it runs)
    for value in (None, "", "0", "false"):
        assert not any(
            m.startswith("registering resource: ty=kubernetes:") for m in _debug_lines(caplog, monkeypatch, value)
        ), value


def test_a_value_not_understood_drops_them_and_says_so() -> None:
    assert drop_sdk_debug({SDK_DEBUG_ENV: "yes please"}) == (
        "GPUAAS_SDK_DEBUG='yes please': not one of 1, true, 0, false (or unset); the SDK's debug messages are dropped"
    )
    assert drop_sdk_debug({SDK_DEBUG_ENV: "0"}) is None
    assert drop_sdk_debug({}) is None
