"""Config problems as ``gpuaas:<path>: <reason>`` lines — what a user can act on.

Pydantic's errors and the cross-field rules both become :class:`Issue`; :class:`ConfigError`
carries all of them so a stack with five mistakes is fixed in one round, not five.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

Loc = tuple[str | int, ...]
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Discriminator tags pydantic inserts into locations; they are not keys the user wrote.
_UNION_TAGS = {"onprem", "aks"}
_UNION_PARENTS = {"platform", "partition"}


@dataclass(frozen=True, order=True)
class Issue:
    """One problem: where it is (a path under ``gpuaas:``) and what is wrong and allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(Exception):
    """Raised by :func:`components.loader.parse_config` with every problem found."""

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues = list(issues)
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.issues)
        head = f"gpuaas: {n} problem{'s' if n != 1 else ''} in the stack config:"
        return "\n".join([head, *(f"  {i}" for i in self.issues)])


def path(loc: Iterable[str | int]) -> str:
    """``("teams", 1, "partition", "pkey")`` → ``gpuaas:teams[1].partition.pkey``."""
    out = "gpuaas:"
    prev: str | int | None = None
    first = True
    for part in loc:
        if isinstance(part, str) and part in _UNION_TAGS and prev in _UNION_PARENTS:
            prev = part
            continue
        if isinstance(part, int) or (isinstance(part, str) and part.startswith("[")):
            out += f"[{part}]" if isinstance(part, int) else part
        elif _IDENT.match(part):
            out += part if first else f".{part}"
        else:
            out += f'["{part}"]'
        first = False
        prev = part
    return out


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(str(k) for k in value)) + "}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def from_validation_error(err: ValidationError, allowed_keys: dict[Loc, list[str]] | None = None) -> list[Issue]:
    """Turn pydantic errors into issues with the user's key names (aliases) and values."""
    issues: list[Issue] = []
    for e in err.errors(include_url=False):
        loc: Loc = tuple(e["loc"])
        kind = e["type"]
        msg = e["msg"]
        value = e.get("input")
        if kind == "extra_forbidden":
            parent = tuple(p for p in loc[:-1] if not (isinstance(p, str) and p in _UNION_TAGS))
            keys = (allowed_keys or {}).get(_generic(parent))
            near = difflib.get_close_matches(str(loc[-1]), keys or [], n=1, cutoff=0.6)
            hint = f" (did you mean {path((*loc[:-1], near[0]))}?)" if near else ""
            msg = "unknown key" + hint + (f"; allowed: {', '.join(keys)}" if keys else "")
        elif kind == "missing":
            msg = "is required"
        elif kind in ("value_error", "assertion_error"):
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        elif kind in ("union_tag_invalid", "literal_error", "enum"):
            msg = f"{msg} (got {_show(value)})"
        else:
            msg = f"{msg} (got {_show(value)})"
        issues.append(Issue(path(loc), msg))
    return sorted(set(issues))


def _generic(loc: Loc) -> Loc:
    """A location with list indices and dict keys wildcarded, to look up allowed keys."""
    return tuple("*" if isinstance(p, int) else p for p in loc)
