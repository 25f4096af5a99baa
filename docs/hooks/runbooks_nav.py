"""MkDocs hook: every ``docs/runbooks/<AlertName>.md`` joins the nav's Runbooks section.

The operability work writes one runbook per alert and points the alert's ``runbook_url`` at it;
listing each by hand in ``mkdocs.yml`` would make every new alert a nav edit, and the strict build
(``validation.nav.omitted_files``) would fail on the one forgotten. The section keeps what
``mkdocs.yml`` lists for it (its ``index.md`` first) and gets every other page of the folder after
it, sorted by file name, so the order never depends on the file system.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SECTION = "Runbooks"
FOLDER = "runbooks"


def runbook_pages(docs_dir: Path, listed: list[Any]) -> list[Any]:
    """The section's entries: those listed in mkdocs.yml, then every other runbook page by name."""
    named = {e if isinstance(e, str) else next(iter(e.values())) for e in listed}
    found = sorted(p.relative_to(docs_dir).as_posix() for p in (docs_dir / FOLDER).glob("*.md"))
    return [*listed, *(p for p in found if p not in named)]


def on_config(config: Any) -> Any:
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and SECTION in entry:
            entry[SECTION] = runbook_pages(Path(config["docs_dir"]), entry[SECTION])
    return config
