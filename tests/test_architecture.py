"""The layout of components/ holds (ARCHITECTURE.md): no import hidden in a function, no grab-bag module.

The layers themselves are import-linter's contracts in pyproject.toml (``make lint`` runs
``lint-imports``); these tests keep the two habits that contract cannot see: a cycle dodged by
importing inside a function, and a module that grows past one reader's sitting.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ROOT / "components"
#: Past this a module must say, in its docstring, why it is one piece ("One piece: ...").
MAX_LINES = 400


def _modules() -> list[Path]:
    return sorted(COMPONENTS.rglob("*.py"))


def _local_imports(path: Path) -> Iterator[tuple[int, str, ast.Import | ast.ImportFrom]]:
    """``(line, function, import)`` of every import inside a function of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield node.lineno, fn.name, node


def _ours(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "components"
    return any(alias.name.split(".")[0] == "components" for alias in node.names)


def test_no_module_imports_one_of_ours_inside_a_function() -> None:
    """An import inside a function is how a cycle hides from the layer contract: move the shared piece down."""
    found = [
        f"{path.relative_to(ROOT)}:{line} in {fn}(): {ast.unparse(node)}"
        for path in _modules()
        for line, fn, node in _local_imports(path)
        if _ours(node)
    ]
    assert found == [], "imports of components.* inside functions:\n" + "\n".join(found)


def test_every_lazy_third_party_import_says_why() -> None:
    """A third-party import inside a function is allowed where it keeps a tool fast, with a comment saying so."""
    unexplained = []
    for path in _modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        for line, fn, node in _local_imports(path):
            above = line - 2
            # The comment may sit on the import's line or above the group of imports it starts.
            while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
                above -= 1
            if "#" not in lines[line - 1] and not (above >= 0 and lines[above].strip().startswith("#")):
                unexplained.append(f"{path.relative_to(ROOT)}:{line} in {fn}(): {ast.unparse(node)}")
    assert unexplained == [], "lazy imports without a comment giving the reason:\n" + "\n".join(unexplained)


def test_a_long_module_says_why_it_is_one_piece() -> None:
    long = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > MAX_LINES and "One piece:" not in doc:
            long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert long == [], f"modules over {MAX_LINES} lines; split them, or say why not ('One piece: ...'):\n" + "\n".join(
        long
    )


def test_the_detector_sees_a_hidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    # why\n    import json\n    from components import k8s\n")
    found = list(_local_imports(sample))
    assert [(line, fn, _ours(node)) for line, fn, node in found] == [(3, "f", False), (4, "f", True)]
