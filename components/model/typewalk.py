"""Walks of the config's types: where a boolean may stand, and which models sit under a field.

The loader reads them for two checks pydantic does not make: no ``true``/``false`` where a number
or a name is expected (:func:`booleans`), and the keys allowed at each place for "unknown key"
messages (:func:`models_in`, :func:`keys_of`).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from components.model.errors import Issue, Loc, path


def admits_bool(tp: Any) -> bool:
    """Whether a field of type ``tp`` takes ``true``/``false`` itself (``bool``, ``Any``, a Literal of one)."""
    if tp is bool or tp is Any:
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in args)
    if origin is typing.Annotated:
        return admits_bool(args[0])
    if origin in (typing.Union, types.UnionType):
        return any(admits_bool(a) for a in args)
    return False


def items_of(tp: Any) -> Any:
    """The item type of a list or map type (through Annotated and Optional), else ``None``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return items_of(args[0])
    if origin in (typing.Union, types.UnionType):
        found = [i for a in args if (i := items_of(a)) is not None]
        return found[0] if found else None
    if origin in (list, tuple, set, frozenset):
        return args[0] if args else None
    if origin is dict:
        return args[1] if len(args) == 2 else None
    return None


def booleans(raw: Any, tp: Any, loc: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Issue]]:
    """Every ``true``/``false`` where the model wants a number or a name.

    Pydantic's lax mode takes a boolean for an int: ``gpus: true`` would be one GPU, ``vfIndex:
    true`` VF 1, ``pods: false`` none. A general rule beside the per-field grammars: only a
    boolean field takes a boolean.
    """
    if isinstance(raw, bool):
        if not admits_bool(tp):
            word = "true" if raw else "false"
            yield (
                loc,
                Issue(
                    path(loc),
                    f"{word} is a boolean where a number or a name is expected ({word} is not {int(raw)} here): "
                    "write the value itself",
                ),
            )
        return
    models = [m for m, suffix in models_in(tp) if not suffix]
    if isinstance(raw, Mapping) and models:
        model = max(models, key=lambda m: len(set(raw) & keys_of(m)))
        fields = {f.alias or n: f for n, f in model.model_fields.items()} | dict(model.model_fields)
        for key, value in raw.items():
            if isinstance(key, str) and key in fields:
                yield from booleans(value, fields[key].annotation, (*loc, key))
        return
    item = items_of(tp)
    if item is None:
        return
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            yield from booleans(value, item, (*loc, str(key)))
    elif isinstance(raw, list):
        for i, value in enumerate(raw):
            yield from booleans(value, item, (*loc, i))


def keys_of(model: type[BaseModel]) -> set[str]:
    return {f.alias or n for n, f in model.model_fields.items()}


def models_in(tp: Any) -> list[tuple[type[BaseModel], Loc]]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return models_in(typing.get_args(tp)[0])
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [(tp, ())]
    if origin in (list, tuple):
        return [(m, ("*", *s)) for a in typing.get_args(tp) for m, s in models_in(a)]
    if origin in (typing.Union, types.UnionType):
        return [x for a in typing.get_args(tp) for x in models_in(a)]
    return []
