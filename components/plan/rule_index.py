"""Which cross-field rules name each config key: the "rules" column of the config reference.

The model checks what one field can get wrong; the rules (:mod:`components.rules`, one module per
area) bind keys to each other, and each names the keys it checks in its messages and issue paths
(``teams[1].partition.vfIndex``, ``raising platform.fabric.vfsPerHca``). A reader of one key in the
reference needs to know which of those rules can refuse it, so this index is read from the rules'
own source: the string literals of each area module (docstrings left out: they describe, they do
not refuse), never a hand-kept list that could drift.

A key is named by an area when one of its literals holds the key with its parent
(``partition.vfIndex``, ``fabric.vfsPerHca``), or is the key alone where the key is distinctive
(camelCase, such as ``"vfIndex"`` passed to the helper that builds an issue's path). A plain word
like ``name`` alone never counts: every area writes it.
"""

from __future__ import annotations

import ast
import functools
import itertools
import pkgutil
import re
from pathlib import Path

from components import rules

#: The areas, by module name (``common`` holds helpers, no rule).
AREAS: tuple[str, ...] = tuple(sorted(m.name for m in pkgutil.iter_modules(rules.__path__) if m.name != "common"))
_PATH = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:\[[^\]]*\])?(?:\.[A-Za-z][A-Za-z0-9]*(?:\[[^\]]*\])?)+")
_INDEX = re.compile(r"\[[^\]]*\]")
_WORD = re.compile(r"[a-z]+[A-Z][A-Za-z0-9]*")


def literals(source: str) -> list[str]:
    """Every string literal of ``source`` (f-strings' text parts too), docstrings left out."""
    tree = ast.parse(source)
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def mentions(source: str) -> tuple[set[tuple[str, str]], set[str]]:
    """(parent, key) pairs the literals of ``source`` name, and the camelCase keys written alone."""
    pairs: set[tuple[str, str]] = set()
    words: set[str] = set()
    for text in literals(source):
        for m in _PATH.finditer(text):
            segments = _INDEX.sub("", m.group(0)).split(".")
            pairs.update(itertools.pairwise(segments))
        if _WORD.fullmatch(text):
            words.add(text)
    return pairs, words


@functools.cache
def _area_mentions() -> dict[str, tuple[set[tuple[str, str]], set[str]]]:
    here = Path(rules.__file__).parent
    return {area: mentions((here / f"{area}.py").read_text(encoding="utf-8")) for area in AREAS}


def parent_key(where: str) -> str | None:
    """The key a reference section sits under (``platform (OnPremPlatform).fabric`` → ``fabric``)."""
    if not where:
        return None
    last = re.sub(r" \([^)]*\)", "", where).split(".")[-1]
    return last.removesuffix("[]")


def areas_naming(where: str, key: str) -> list[str]:
    """The rule areas that name ``key`` of the section ``where`` (a top-level key: none, its
    sub-keys carry the rules)."""
    parent = parent_key(where)
    if parent is None:
        return []
    return [
        area
        for area, (pairs, words) in _area_mentions().items()
        if (parent, key) in pairs or (_WORD.fullmatch(key) is not None and key in words)
    ]
