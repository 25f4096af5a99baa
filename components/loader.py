"""Reading a stack's config: from a plain dict (tests, the plan) or from the Pulumi runtime.

:func:`parse_config` is pure and raises :class:`ConfigError` listing every problem;
:func:`load_config` wraps it for ``__main__.py`` and exits cleanly — a message per line, no
traceback — before any resource is registered.
"""

from __future__ import annotations

import contextlib
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from components.config import StackConfig
from components.errors import ConfigError, Loc, from_validation_error
from components.rules import check

NAMESPACE = "gpuaas"


def parse_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate ``raw`` (the ``gpuaas:*`` keys without their prefix) into a :class:`StackConfig`."""
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        raise ConfigError(from_validation_error(err, allowed_keys())) from None
    issues = check(cfg)
    if issues:
        raise ConfigError(issues)
    return cfg


def allowed_keys() -> dict[Loc, list[str]]:
    """Every model location (indices as ``*``) → the keys allowed there, for 'unknown key' errors."""
    out: dict[Loc, list[str]] = {}

    def walk(model: type[BaseModel], loc: Loc) -> None:
        if loc in out:
            out[loc] = sorted(set(out[loc]) | {f.alias or n for n, f in model.model_fields.items()})
        else:
            out[loc] = sorted(f.alias or n for n, f in model.model_fields.items())
        for name, field in model.model_fields.items():
            for sub, suffix in _models_in(field.annotation):
                walk(sub, (*loc, field.alias or name, *suffix))

    walk(StackConfig, ())
    return out


def _models_in(tp: Any) -> list[tuple[type[BaseModel], Loc]]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(tp)[0])
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [(tp, ())]
    if origin in (list, tuple):
        return [(m, ("*", *s)) for a in typing.get_args(tp) for m, s in _models_in(a)]
    if origin in (typing.Union, types.UnionType):
        return [x for a in typing.get_args(tp) for x in _models_in(a)]
    return []


def raw_from_pulumi() -> dict[str, Any]:
    """The ``gpuaas:*`` keys of the running stack, objects decoded from their JSON form."""
    from pulumi.runtime import config as runtime_config

    merged: dict[str, Any] = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    raw: dict[str, Any] = {}
    for key in sorted(merged):
        ns, _, name = key.partition(":")
        if ns != NAMESPACE or not name:
            continue
        value = merged[key]
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(value)
        raw[name] = value
    return raw


def load_config() -> StackConfig:
    """Parse the running stack's config or stop the program with every problem listed."""
    import pulumi

    try:
        return parse_config(raw_from_pulumi())
    except ConfigError as err:
        raise pulumi.RunError(err.render()) from None
