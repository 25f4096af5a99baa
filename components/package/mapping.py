"""From the package-facing arguments (plain dicts, :mod:`components.package.types`) to the components' own.

Pure: no Pulumi. The provider host hands a component its arguments as a dict keyed by Python names,
enums as enum members, one optional key per member of a union (``platform: {onprem: {...}}``).
:func:`raw_section` walks such a dict beside the model type it stands for and gives back what a
stack file says (camelCase keys, plain values, the union member's ``kind`` put back); then
:func:`stack_config` validates the sections a component reads with the loader's own
:func:`~components.loader.parse_config`: the model's defaults and every rule, all problems at once,
each named by its key (``gpuaas:network.ofedDriver``).

Each component reads the sections :data:`SECTIONS` names, and nothing else: a package user
writes those, not a whole stack.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from components.loader import parse_config
from components.model.config import StackConfig
from components.model.errors import ConfigError, Issue

#: The stack-config sections each exposed component reads (``platform`` always, required), by
#: the component's type name. ``Team`` reads one ``team`` (the stack's ``teams`` list of one).
SECTIONS: Final[dict[str, tuple[str, ...]]] = {
    "NetworkOperator": ("platform", "network", "versions", "charts"),
    "NicClusterPolicy": ("platform", "network", "versions", "teams"),
    "IbNodeConfig": ("platform", "network", "versions"),
    "RdmaSharedDevicePlugin": ("platform", "network", "versions", "teams"),
    "GpuOperator": ("platform", "gpu_operator", "network", "observability", "versions", "charts"),
    "OnPremNodes": ("platform", "gpu_operator", "versions"),
    "AksCluster": ("platform", "network", "versions"),
    "AksNdPool": ("platform", "gpu_operator", "network", "versions"),
    "Team": ("platform", "team", "network", "queues", "quota_policy", "versions"),
}

#: The ``team`` argument of ``Team`` is one item of the stack's ``teams``.
SINGLE: Final[dict[str, str]] = {"team": "teams"}


class NotPlainError(ValueError):
    """An argument arrived as an Output: the components decide resource counts from these values."""


def _is_output(value: Any) -> bool:
    # Outputs are recognised by their class name so that this module stays free of Pulumi.
    return any(c.__name__ == "Output" and c.__module__.startswith("pulumi") for c in type(value).__mro__)


def raw_section(value: Any, tp: Any, path: str) -> Any:
    """``value`` (package form) as the stack file writes it, walked beside the model type ``tp``."""
    if _is_output(value):
        raise NotPlainError(f"{path}: must be a plain value, not an Output (it decides which objects are created)")
    if isinstance(value, enum.Enum):
        return value.value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return raw_section(value, args[0], path)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return raw_section(value, members[0], path)
        return _one_of(value, members, path)
    if origin in (list, tuple, set, frozenset) and isinstance(value, Sequence) and not isinstance(value, str):
        return [raw_section(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        return {k: raw_section(v, args[1], f"{path}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(value, Mapping):
        fields = tp.model_fields
        out: dict[str, Any] = {}
        for key, v in value.items():
            if v is None:
                continue  # not given: the model's default
            info = fields.get(key)
            # An unknown key is passed on as written: the model refuses it, naming the allowed ones.
            out[to_camel(key) if info else key] = (
                raw_section(v, info.annotation, f"{path}.{to_camel(key)}") if info else v
            )
        return out
    return value


def _one_of(value: Any, members: list[Any], path: str) -> Any:
    """``{tag: {...}}`` -> the member's own dict, with its ``kind`` where the model has one."""
    tags = {tag: model for tag, model in map(union_member, members)}
    if not isinstance(value, Mapping) or len([k for k, v in value.items() if v is not None]) != 1:
        given = sorted(value) if isinstance(value, Mapping) else type(value).__name__
        raise ConfigError([Issue(path, f"exactly one of {sorted(tags)} must be set (got {given})")])
    (tag, inner), *_ = [(k, v) for k, v in value.items() if v is not None]
    if tag not in tags:
        raise ConfigError([Issue(path, f"{tag!r} is not one of {sorted(tags)}")])
    model = tags[tag]
    raw = raw_section(inner, model, f"{path}.{tag}")
    if "kind" in model.model_fields and isinstance(raw, dict):
        raw = {"kind": tag, **raw}
    return raw


def raw_config(component: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gpuaas:`` sections (prefix stripped, as :func:`parse_config` takes them) of ``args``."""
    raw: dict[str, Any] = {}
    fields = StackConfig.model_fields
    for section in SECTIONS[component]:
        value = args.get(section)
        if value is None:
            continue
        key = SINGLE.get(section, section)
        tp = fields[key].annotation
        if section in SINGLE:
            value = [value]
        raw[to_camel(key)] = raw_section(value, tp, f"gpuaas:{to_camel(key)}")
    return raw


def stack_config(component: str, args: Mapping[str, Any]) -> StackConfig:
    """The parsed config ``component`` builds from: its sections of ``args``, every other one at its
    default. Raises :class:`~components.model.errors.ConfigError` with every problem."""
    return parse_config(raw_config(component, args))


def platform_config(args: Mapping[str, Any]) -> StackConfig:
    """The whole stack config of the ``Platform`` component (every section)."""
    raw = {
        to_camel(k): raw_section(v, StackConfig.model_fields[k].annotation, f"gpuaas:{to_camel(k)}")
        for k, v in args.items()
        if v is not None and k in StackConfig.model_fields
    }
    unknown = sorted(set(args) - set(StackConfig.model_fields))
    if unknown:
        raise ConfigError([Issue(f"gpuaas:{k}", "not a section of the stack config") for k in unknown])
    return parse_config(raw)


def union_member(member: Any) -> tuple[str, type[BaseModel]]:
    """(tag, model) of one member of a discriminated union: a ``Tag`` or the model's own literal."""
    if typing.get_origin(member) is typing.Annotated:
        model, *meta = typing.get_args(member)
        for m in meta:
            tag = getattr(m, "tag", None)
            if isinstance(tag, str):
                return tag, model
        member = model
    for fname, info in member.model_fields.items():
        tag = discriminator_of(member, fname, info)
        if tag is not None:
            return tag, member
    raise TypeError(f"{member!r}: a union member needs a Tag or a one-value Literal field")


def discriminator_of(model: type[BaseModel], fname: str, info: FieldInfo) -> str | None:
    """The tag when ``fname`` is ``model``'s discriminator (``kind: Literal["onprem"]``), else ``None``."""
    if fname != "kind" or typing.get_origin(info.annotation) is not typing.Literal:
        return None
    values = typing.get_args(info.annotation)
    return str(values[0]) if len(values) == 1 else None
