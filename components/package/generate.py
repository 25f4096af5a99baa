"""Generate the package-facing argument types (:mod:`components.package.types`) from the config model.

Why generated: Pulumi's component provider host (``pulumi.provider.experimental``, SDK 3.272.0)
builds the package schema from type annotations it can read, and it reads less than the model
says. Measured here: arguments arrive as plain dicts (TypedDict-shaped types); a module with
``from __future__ import annotations`` fails its analyzer; ``Literal``, ``Annotated``, unions
and resource-typed fields are refused; field defaults are not seen; a field's description is the
string literal right after it. So each model section becomes a TypedDict of its own here, written
as source the analyzer reads: ``Literal`` becomes an ``Enum``, ``Annotated`` its base type
(a P_Key or GUID a string, as written in a stack file), a union of sections one optional field
per member (``platform: {onprem: {...}}``), every field with a default ``NotRequired`` and its
description the model's own ``#:`` comment plus "Defaults to X." — one source for both.

    python -m components.package.generate          # rewrite types.py, then provider/schema.json
    python -m components.package.generate --check  # exit 1 when either is stale
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import re
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from components.model.config import StackConfig
from components.model.types import parse_guid, parse_pkey
from components.package.mapping import SECTIONS, SINGLE, discriminator_of, union_member

HERE = Path(__file__).resolve().parent
TYPES_FILE = HERE / "types.py"
ROOT = HERE.parent.parent

#: Validators whose accepted input is wider than their type: a P_Key or GUID is written as hex
#: text in a stack file (``"0x0001"``), parsed into an int by the model.
TEXT_PARSERS: tuple[Any, ...] = (parse_pkey, parse_guid)


def _text_input(metadata: Any) -> bool:
    return any(getattr(m, "func", None) in TEXT_PARSERS for m in metadata)


#: The name of the TypedDict for the model root: the Platform component's arguments.
ROOT_NAME = "PlatformArgs"


def type_name(model: type[BaseModel]) -> str:
    """``Network`` -> ``NetworkConfig``: a section's type name, apart from the component names."""
    if model is StackConfig:
        return ROOT_NAME
    return model.__name__ if model.__name__.endswith("Config") else f"{model.__name__}Config"


def _pascal(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


def _member_name(value: Any, field: str) -> str:
    if isinstance(value, str):
        name = re.sub(r"[^0-9A-Za-z]+", "_", value).strip("_").upper()
        return name if name and not name[0].isdigit() else f"{field.upper()}_{name}"
    return f"{field.upper()}_{value}"


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comment lines right above each field of ``model``'s class body, joined."""
    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        m = re.match(r"^    (\w+)\s*:", line)
        if m and pending:
            out[m.group(1)] = " ".join(pending)
        pending = []
    return out


def _default_text(info: FieldInfo) -> str | None:
    """``Defaults to `X`.`` for a field whose default is plain data (not a section of its own)."""
    if info.is_required():
        return None
    value = info.get_default(call_default_factory=True)
    if value is None or isinstance(value, BaseModel):
        return None
    if isinstance(value, list | tuple) and any(isinstance(v, BaseModel) for v in value):
        return None
    if isinstance(value, dict) and any(isinstance(v, BaseModel) for v in value.values()):
        return None
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        return f"Defaults to `{json.dumps(value)}`."
    except TypeError:
        return None


class Writer:
    """Collects the TypedDicts and Enums reachable from the model root, in first-use order."""

    def __init__(self) -> None:
        self.blocks: dict[str, str] = {}
        self.pending: set[str] = set()

    # -----------------------------------------------------------------------------------
    def annotation(self, tp: Any, owner: str, field: str) -> str:
        """The package-facing annotation of a model field type (without NotRequired)."""
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            return "str" if _text_input(args[1:]) else self.annotation(args[0], owner, field)
        if origin in (typing.Union, types.UnionType):
            members = [a for a in args if a is not type(None)]
            if len(members) == 1:
                return self.annotation(members[0], owner, field)
            return self.one_of(members, field)
        if origin is typing.Literal:
            return self.literal(args, owner, field)
        if origin in (list, tuple, set, frozenset):
            items = [a for a in args if a is not Ellipsis]
            return f"list[{self.annotation(items[0], owner, field)}]"
        if origin is dict:
            return f"dict[str, {self.annotation(args[1], owner, field)}]"
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return self.model(tp)
        if tp in (str, int, bool, float):
            return str(tp.__name__)
        raise TypeError(f"{owner}.{field}: no package-facing form for {tp!r}")

    def literal(self, values: tuple[Any, ...], owner: str, field: str) -> str:
        name = f"{owner.removesuffix('Config')}{_pascal(field)}"
        if name in self.blocks:
            return name
        base = "enum.StrEnum" if all(isinstance(v, str) for v in values) else "enum.IntEnum"
        members = "\n".join(f"    {_member_name(v, field)} = {json.dumps(v)}" for v in values)
        self.blocks[name] = f'class {name}({base}, enum.Enum):\n    """Allowed values of ``{field}``."""\n\n{members}\n'
        return name

    def one_of(self, members: list[Any], field: str) -> str:
        """A union of sections: one optional field per member, named by its tag."""
        name = f"{_pascal(field)}Config"
        if name in self.blocks or name in self.pending:
            return name
        self.pending.add(name)
        lines = [f"class {name}(TypedDict):", f'    """Exactly one of these: the kind of ``{field}``."""', ""]
        for member in members:
            tag, model = union_member(member)
            lines.append(f"    {tag}: NotRequired[{self.model(model)}]")
            lines.append(f'    """Set for {tag}: {first_line(model.__doc__)}"""')
        self.blocks[name] = "\n".join(lines) + "\n"
        self.pending.discard(name)
        return name

    def model(self, model: type[BaseModel]) -> str:
        name = type_name(model)
        if name in self.blocks or name in self.pending:
            return name
        self.pending.add(name)
        comments = field_comments(model)
        doc = (model.__doc__ or name).strip()
        lines = [f"class {name}(TypedDict):", *_docstring(doc, 4), ""]
        for fname, info in model.model_fields.items():
            if discriminator_of(model, fname, info) is not None:
                continue  # the member's tag: said by the field it sits under (``platform: {onprem: ...}``)
            # Pydantic keeps a field's own Annotated metadata beside its annotation.
            ann = "str" if _text_input(info.metadata) else self.annotation(info.annotation, name, fname)
            if not info.is_required():
                ann = f"NotRequired[{ann}]"
            desc = " ".join(p for p in (info.description or comments.get(fname), _default_text(info)) if p)
            lines.append(f"    {fname}: {ann}")
            if desc:
                lines.extend(_docstring(desc, 4))
        self.blocks[name] = "\n".join(lines) + "\n"
        self.pending.discard(name)
        return name


def first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc and doc.strip() else ""


def _docstring(text: str, indent: int) -> list[str]:
    """One line, whatever its length: the analyzer keeps a docstring's line breaks and indentation
    in the description (the generated file is exempt from the line length, pyproject.toml)."""
    body = " ".join(text.split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    return [" " * indent + f'"""{body}"""']


HEADER = '''"""Package-facing argument types: GENERATED by ``python -m components.package.generate``. Do not edit.

One TypedDict per config section (:mod:`components.model`), written the way Pulumi's component
provider host reads types (see :mod:`components.package.generate` for why each rule): no
``from __future__ import annotations``, enums for literals, one optional field per member of a
union, each field's description the string right after it. The components' own arguments are
the model's; :mod:`components.package.mapping` turns these dicts into them.

One piece: generated from the whole config model at once, and read by Pulumi's analyzer as one
module of types (a type's name is its identity in the package schema).
"""

import enum
from typing import NotRequired, TypedDict
'''


def _section_doc(key: str, single: bool) -> str:
    """A component argument's description: the section it is, and what that section holds."""
    tp = StackConfig.model_fields[key].annotation
    models = [m for m in _models_in(tp)]
    what = " ".join(first_line(m.__doc__) for m in models if first_line(m.__doc__))
    written = f"one item of ``gpuaas:{to_camel(key)}``" if single else f"``gpuaas:{to_camel(key)}``"
    return f"As {written} in a stack file. {what}".strip()


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    out: list[type[BaseModel]] = []
    for a in typing.get_args(tp):
        out.extend(m for m in _models_in(a) if m not in out)
    return out


def component_args(w: Writer, component: str) -> None:
    """``<Component>Args``: the sections ``component`` reads (:data:`~components.package.mapping.SECTIONS`)."""
    lines = [
        f"class {component}Args(TypedDict):",
        f'    """Arguments of ``{component}``: the stack-config sections it reads, each as a stack file writes it."""',
        "",
    ]
    for section in SECTIONS[component]:
        key = SINGLE.get(section, section)
        tp = StackConfig.model_fields[key].annotation
        if section in SINGLE:
            tp = typing.get_args(tp)[0]
        ann = w.annotation(tp, f"{component}Args", section)
        required = section in ("platform", *SINGLE)
        lines.append(f"    {section}: {ann if required else f'NotRequired[{ann}]'}")
        lines.extend(_docstring(_section_doc(key, section in SINGLE), 4))
    w.blocks[f"{component}Args"] = "\n".join(lines) + "\n"


def render() -> str:
    w = Writer()
    w.model(StackConfig)
    for component in SECTIONS:
        component_args(w, component)
    order = list(w.blocks)
    return HEADER + "".join(f"\n\n{w.blocks[n]}" for n in order)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    a = p.parse_args(argv)
    text = render()
    current = TYPES_FILE.exists() and TYPES_FILE.read_text() == text
    if not current and a.check:
        print(f"stale: {TYPES_FILE.relative_to(ROOT)} (run python -m components.package.generate)")
        return 1
    if not current:
        TYPES_FILE.write_text(text)
        print(f"wrote {TYPES_FILE.relative_to(ROOT)}")
    # The schema is inferred from the types just written: a fresh interpreter imports them.
    cmd = [sys.executable, "-m", "components.package.schema", *(["--check"] if a.check else [])]
    return subprocess.run(cmd, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
