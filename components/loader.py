"""Reading a stack's config: from a plain dict (tests, the plan) or from the Pulumi runtime.

:func:`parse_config` is pure and raises :class:`ConfigError` listing every problem;
:func:`load_config` wraps it for ``__main__.py`` and exits cleanly — a message per line, no
traceback — before any resource is registered.
"""

from __future__ import annotations

import contextlib
import copy
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from components.config import StackConfig
from components.errors import ConfigError, Issue, Loc, from_validation_error, path
from components.rules import check

NAMESPACE = "gpuaas"


def parse_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate ``raw`` (the ``gpuaas:*`` keys without their prefix) into a :class:`StackConfig`."""
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        issues = from_validation_error(err, allowed_keys())
        raise ConfigError(sorted(set(issues) | set(_rules_beside(raw, err)))) from None
    issues = check(cfg)
    if issues:
        raise ConfigError(issues)
    return cfg


def _rules_beside(raw: Mapping[str, Any], err: ValidationError, rounds: int = 6) -> list[Issue]:
    """Cross-field issues elsewhere in a config that also has structural errors.

    Each bad value is pruned (a required one takes its parent with it) and the rest is checked,
    so one round of editing fixes everything. List indices never shift, so paths stay true.
    Issues inside a pruned item (e.g. ``teams[1]``) are dropped: they would describe the pruned
    config, not the user's.
    """
    pruned = copy.deepcopy(dict(raw))
    scopes: set[str] = set()
    for _ in range(rounds):
        for e in err.errors(include_url=False):
            loc = [p for p in e["loc"] if not (isinstance(p, str) and p in ("onprem", "aks"))]
            while loc and (isinstance(loc[-1], int) or e["type"] == "missing"):
                loc = loc[:-1]  # a list item or a required key: prune what holds it
                if e["type"] == "missing":
                    break
            if len(loc) < 2 and loc[:1] != ["versions"] and e["type"] != "extra_forbidden":
                return []  # a whole section is unusable: nothing sensible to check beside it
            first_item = next((i for i, p in enumerate(loc) if isinstance(p, int)), len(loc) - 1)
            scopes.add(path(loc[: first_item + 1]))
            _remove(pruned, loc)
        try:
            cfg = StackConfig.model_validate(pruned)
        except ValidationError as again:
            err = again
            continue
        return [i for i in check(cfg) if not any(i.path.startswith(s) for s in scopes) and "[*]" not in i.path]
    return []


def _remove(tree: Any, loc: list[Any]) -> None:
    node = tree
    for part in loc[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(loc[-1], None)


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


def gpuaas_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gpuaas:*`` keys of a stack's config map, prefix stripped (what :func:`parse_config` takes)."""
    prefix = f"{NAMESPACE}:"
    return {key[len(prefix) :]: value for key, value in config.items() if key.startswith(prefix) and key != prefix}


def raw_from_pulumi() -> dict[str, Any]:
    """The ``gpuaas:*`` keys of the running stack, objects decoded from their JSON form."""
    from pulumi.runtime import config as runtime_config

    raw = gpuaas_section({**runtime_config.get_config_env(), **runtime_config.CONFIG.get()})
    for name, value in raw.items():
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):
                raw[name] = json.loads(value)
    return raw


def load_config() -> StackConfig:
    """Parse the running stack's config or stop the program with every problem listed."""
    import pulumi

    try:
        return parse_config(raw_from_pulumi())
    except ConfigError as err:
        raise pulumi.RunError(err.render()) from None
