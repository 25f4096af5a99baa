"""The gate of the day-2 guards: values that wait for every guard to pass, and one report of all their problems.

Each guard (:mod:`components.guards.mig`, :mod:`components.guards.fabric`,
:mod:`components.guards.resource_model`) is a pure check of the config against the stack's last
outputs; :func:`stop_on` fails the run with all their issues at once, and :func:`gated` holds back
what a failed guard must never let reach the cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import pulumi

from components.model.errors import ConfigError, Issue

T = TypeVar("T")

#: Every run exports its stack's name and the outputs' format version (``__main__.py``), so that a
#: ``--previous`` file of another stack, or one cut short, is told apart (components/plan/previous.py).
#: Bump FORMAT when an output a guard reads changes shape.
STACK_KEY = "stack"
FORMAT_KEY = "outputsFormat"
FORMAT = 1


def stop_on(results: Sequence[tuple[list[Issue], list[str]]]) -> bool:
    """Every day-2 guard's ``(issues, warnings)`` at once: log the warnings, stop on any issue.

    Shared by the guards (this one, :mod:`components.guards.fabric`) so that one run reports
    every problem of every guard together, as a bad config does.
    """
    issues = sorted(i for found, _w in results for i in found)
    for _i, warnings in results:
        for w in warnings:
            pulumi.log.warn(w)
    if issues:
        raise pulumi.RunError(ConfigError(issues).render())
    return True


#: What asyncio says of a future or task whose exception nobody awaited, when it is collected.
UNRETRIEVED = "exception was never retrieved"


def report_refusals_once(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Let a refusal (:class:`pulumi.RunError`) be reported once, as the run's error, not once per Output.

    A guard's refusal fails the Output every gated resource waits on; the SDK reports the run's
    error once, and the futures of the other waiters are collected later with their exception
    unread, for each of which asyncio's default handler would print "Future exception was never
    retrieved" and the whole traceback (hundreds for one refused MIG change). Those, and only
    those, are dropped here; every other exception still reaches the loop's handler as before.
    """
    loop = loop or asyncio.get_event_loop()
    previous = loop.get_exception_handler()
    if getattr(previous, "reports_refusals_once", False):
        return  # installed by an earlier run on this loop (the offline plan runs the program often)

    def handler(lp: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), pulumi.RunError) and UNRETRIEVED in str(context.get("message", "")):
            return
        if previous is not None:
            previous(lp, context)
        else:
            lp.default_exception_handler(context)

    handler.reports_refusals_once = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def string_map(name: str, value: object) -> Mapping[str, str] | None:
    """The last run's output ``name`` as a map of strings; ``None`` (compare nothing) otherwise."""
    if value is None:
        return None
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return value
    pulumi.log.warn(f"the last run's {name} output is not a map of strings; its day-2 guard ignores it")
    return None


def gated(gate: pulumi.Output[bool] | None, value: T) -> pulumi.Input[T]:
    """``value`` once ``gate`` has passed: when the guard fails, ``value`` is never sent."""
    if gate is None:
        return value
    return gate.apply(lambda _: value)


def once_applied(gate: pulumi.Output[bool], resources: Sequence[pulumi.CustomResource], value: T) -> pulumi.Output[T]:
    """``value`` once the guard passed and every resource carrying the labels is applied.

    Stack outputs are registered even when a run fails part-way (``pulumi up --skip-preview``,
    the Automation API); exporting the new layouts only through this keeps a stopped run from
    recording them, so the next run still compares against what the nodes really carry.
    """
    return pulumi.Output.all(gate, *[r.id for r in resources]).apply(lambda _: value)
