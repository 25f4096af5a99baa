"""How the Pulumi CLI reads a plain YAML scalar, beside how PyYAML does: the stack file's two readers.

``pulumi up`` reads ``Pulumi.<stack>.yaml`` with ``gopkg.in/yaml.v3`` (pulumi/pulumi sdk v3.274.0
``go/common/encoding/marshal.go``, ``yaml.Unmarshal`` into ``any``; the module pins yaml.v3 v3.0.1)
and hands the program each config value as that decoder typed it (``resource/config/object.go``
``unmarshalObject``: a ``time.Time`` becomes its ``String()``). The offline plan reads the same file
with PyYAML, a YAML 1.1 reader. Where the two type a plain (unquoted) scalar differently, the plan
would show one value and ``pulumi up`` deploy another. yaml.v3's resolver (``resolve.go``
``resolve``), ported in :func:`go_scalar`:

* booleans are ``true``/``false`` (``True``, ``TRUE``, ...) only: ``on``, ``off``, ``yes``, ``no``
  are strings (PyYAML: booleans);
* no base 60: ``1:30`` is the string ``"1:30"`` (PyYAML: 90; ``pkey: 1:0`` partition 0x003c);
* integers after every ``_`` is removed, by Go's ``strconv.ParseInt(s, 0, 64)``: ``1_000`` is
  1000 (as in PyYAML), ``0o17`` and ``0O17`` are 15 and ``0X1F`` 31 (PyYAML: strings), ``0777`` is
  511 (as in PyYAML); beyond int64, ``ParseUint``, then a float;
* floats by ``yamlStyleFloat`` and Go's ``ParseFloat``: ``1e3`` and ``09`` are numbers (PyYAML:
  strings, it wants a '.' and a signed exponent); one past float64's range is a string;
* ``YYYY-MM-DD`` dates and timestamps are ``time.Time`` (the program gets
  ``2026-12-01 00:00:00 +0000 UTC``); :mod:`components.model.yamlfile` keeps them as written.

:func:`differences` lists every plain scalar, keys included, that the two read differently, so the
loader can refuse it by its key: quoting it makes both read the same string.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterator
from typing import Any, Final

import yaml

#: yaml.v3 resolve.go ``resolveMap``: the plain scalars it looks up before anything else.
_MAP: Final[dict[str, tuple[str, Any]]] = {
    **{s: ("bool", True) for s in ("true", "True", "TRUE")},
    **{s: ("bool", False) for s in ("false", "False", "FALSE")},
    **{s: ("null", None) for s in ("", "~", "null", "Null", "NULL")},
    **{s: ("float", math.nan) for s in (".nan", ".NaN", ".NAN")},
    **{s: ("float", math.inf) for s in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{s: ("float", -math.inf) for s in ("-.inf", "-.Inf", "-.INF")},
}
#: ``resolveTable``: the first character's hint (D digit, S sign, M looked up, '.' float).
_HINT: Final = {**dict.fromkeys("0123456789", "D"), "+": "S", "-": "S", **dict.fromkeys("yYnNtTfFoO~", "M"), ".": "."}
_YAML_STYLE_FLOAT: Final = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
#: Go's ``ParseFloat`` syntax for what yaml.v3 hands it (decimal only: no underscores are left).
_GO_DECIMAL_FLOAT: Final = re.compile(r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")
_INT64: Final = (-(2**63), 2**63 - 1)
_UINT64_MAX: Final = 2**64 - 1
#: yaml.v3 ``allowedTimestampFormats`` (Go layouts: 1-2 digit month, day, hour, minute, second).
_TIMESTAMPS: Final = (
    re.compile(
        r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(\.[0-9]+)?(Z|[-+][0-9]{2}:[0-9]{2})$"
    ),
    re.compile(r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2}) ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(\.[0-9]+)?$"),
    re.compile(r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})$"),
)
_DIGITS: Final = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _go_parse_uint(text: str, base: int) -> int | None:
    """``strconv.ParseUint(text, base, 64)`` for base 0 (prefixes ``0x``, ``0o``, ``0b``, ``0``), 2 or 8."""
    if base == 0:
        lower = text[:2].lower()
        if lower in ("0x", "0o", "0b"):
            base, text = {"0x": 16, "0o": 8, "0b": 2}[lower], text[2:]
        elif text.startswith("0") and len(text) > 1:
            base, text = 8, text[1:]
        else:
            base = 10
    if not text or any(c not in _DIGITS[base] for c in text):
        return None
    value = int(text, base)
    return value if value <= _UINT64_MAX else None


def _go_parse_int(text: str, base: int) -> int | None:
    """``strconv.ParseInt(text, base, 64)``: an optional sign, then :func:`_go_parse_uint`, in int64."""
    sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    magnitude = _go_parse_uint(body, base)
    if magnitude is None:
        return None
    value = sign * magnitude
    return value if _INT64[0] <= value <= _INT64[1] else None


def _go_parse_float(text: str) -> float | None:
    """``strconv.ParseFloat(text, 64)`` for a decimal text; ``None`` where Go answers an error (out of range too)."""
    if not _GO_DECIMAL_FLOAT.match(text):
        return None
    value = float(text)
    return None if math.isinf(value) else value


def _underscores_ok(text: str) -> bool:
    """Go strconv ``underscoreOK``: each '_' between two digits (a float here, so no base prefix)."""
    return "_" not in text or re.fullmatch(r"[-+]?[.0-9eE+-]*", re.sub(r"(?<=[0-9])_(?=[0-9])", "", text)) is not None


def _timestamp(text: str) -> bool:
    """yaml.v3 ``parseTimestamp``: four digits and '-' first, then one of its layouts, as a real date."""
    if not re.match(r"^[0-9]{4}-", text):
        return False
    for layout in _TIMESTAMPS:
        m = layout.match(text)
        if m is None:
            continue
        y, mo, d = (int(g) for g in m.groups()[:3])
        try:
            datetime.date(y, mo, d)
        except ValueError:
            return False
        if len(m.groups()) > 3:
            h, mi, s = (int(g) for g in m.groups()[3:6])
            if h > 23 or mi > 59 or s > 59:
                return False
        return True
    return False


def go_scalar(text: str) -> tuple[str, Any]:
    """``(kind, value)`` of a plain scalar as yaml.v3 v3.0.1 resolves it into ``any``:
    kind ``bool``, ``null``, ``int``, ``float``, ``timestamp`` or ``str``."""
    hint = _HINT.get(text[0]) if text else "N"
    if hint is None:
        return "str", text
    if text in _MAP:
        return _MAP[text]
    if hint == ".":  # ParseFloat on the text as written: '_' between digits is Go literal syntax
        value = _go_parse_float(text.replace("_", "")) if _underscores_ok(text) else None
        return ("float", value) if value is not None else ("str", text)
    if hint in ("D", "S"):
        if _timestamp(text):
            return "timestamp", text
        plain = text.replace("_", "")
        for found in (_go_parse_int(plain, 0), _go_parse_uint(plain, 0)):
            if found is not None:
                return "int", found
        if _YAML_STYLE_FLOAT.match(plain):
            value = _go_parse_float(plain)
            if value is not None:
                return "float", value
        for prefix, base in (("0b", 2), ("0o", 8)):
            if plain.startswith(prefix) and (found := _go_parse_int(plain[2:], base)) is not None:
                return "int", found
            if plain.startswith(f"-{prefix}") and (found := _go_parse_int("-" + plain[3:], base)) is not None:
                return "int", found
    return "str", text


_PY_KIND: Final = {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}


def _same(go: tuple[str, Any], py: Any) -> bool:
    kind, value = go
    if _PY_KIND.get(type(py)) != kind:
        return False
    if kind == "float" and math.isnan(value):
        return math.isnan(py)
    return bool(value == py)


def _shown(kind: str, value: Any) -> str:
    if kind == "timestamp":
        return f"a date (the program gets it as Go prints a time, e.g. '{value} 00:00:00 +0000 UTC')"
    if kind == "str":
        return f"the string {value!r}"
    return f"{'' if kind == 'null' else 'the ' + kind + ' '}{value!r}".strip()


def _py_shown(value: Any) -> str:
    kind = _PY_KIND.get(type(value), type(value).__name__)
    return _shown(kind, value)


def differences(
    root: yaml.Node, loc: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], yaml.Node, str]]:
    """``(path, node, why)`` of every plain scalar under ``root`` (keys too: the path is then the
    mapping's) that PyYAML and the Pulumi CLI read differently; ``why`` says both readings and the fix."""
    constructor = yaml.constructor.SafeConstructor()
    stack: list[tuple[yaml.Node, tuple[str | int, ...], bool]] = [(root, loc, False)]
    seen: set[int] = set()
    while stack:
        node, here, is_key = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    stack.append((key, here, True))
                stack.append((value, (*here, key.value if isinstance(key, yaml.ScalarNode) else "?"), False))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*here, i), False) for i, item in reversed(list(enumerate(node.value))))
        elif isinstance(node, yaml.ScalarNode) and node.style is None and node.tag.startswith("tag:yaml.org,2002:"):
            go = go_scalar(node.value)
            try:
                py = constructor.construct_object(node)
            except yaml.YAMLError:
                py = None if go == ("null", None) else object()  # a tag PyYAML cannot build ('=')
            if go[0] == "timestamp" or not _same(go, py):
                what = f"the key {node.value}" if is_key else node.value
                yield here, node, _why(what, node.value, _py_shown(py), _shown(*go))


def _why(what: str, text: str, py: str, go: str) -> str:
    return (
        f"{what} (unquoted) is {py} to the offline plan (PyYAML, YAML 1.1) but {go} to the Pulumi CLI "
        f"(gopkg.in/yaml.v3), which pulumi up deploys from; quote it ('{text}') or write it as both read it alike"
    )
