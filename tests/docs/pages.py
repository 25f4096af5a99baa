"""What the docs tests share: the pages, their marked blocks, the stacks the tests own."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from components.plan.offline import ROOT

DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def text(page: str) -> str:
    """A page by its path from the repository root (``docs/guides/teams.md``)."""
    return (ROOT / page).read_text()


def section(page: str, heading: str) -> str:
    """The body of ``## heading`` (up to the next ``## ``) of a page."""
    body = text(page).split(f"\n## {heading}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def test_stack_file(stack: str) -> Path:
    """The stack file the docs' examples run against: the tests' own where it exists
    (``tests/stacks/<stack>.yaml``), else the checked-in sample (``Pulumi.<stack>.yaml``)."""
    own = ROOT / "tests" / "stacks" / f"{stack}.yaml"
    return own if own.is_file() else ROOT / f"Pulumi.{stack}.yaml"


test_stack_file.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@dataclass(frozen=True)
class Block:
    """A fenced block a ``<!-- docs-test: ... -->`` comment marks: ``run`` or ``file NAME``."""

    page: Path
    line: int
    action: str
    argument: str
    body: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


_MARKED = re.compile(r"^<!-- docs-test: (run|file) ?(\S*) -->\n```(\w+)\n(.*?)^```$", re.M | re.S)


def marked_blocks(page: Path) -> list[Block]:
    source = page.read_text()
    out = []
    for m in _MARKED.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        out.append(Block(page, line, m.group(1), m.group(2), m.group(4)))
    return out
