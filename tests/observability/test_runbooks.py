"""Every alert has its runbook page, and every page its alert; each page has what on-call needs."""

from __future__ import annotations

import pytest

from components.loader import parse_config
from components.model.observability import RUNBOOK_DIR
from components.observability.groups import rule_file
from tests.conftest import ROOT, STACKS
from tests.observability.configs import observed, sm_in_cluster

PAGES = ROOT / RUNBOOK_DIR
#: The folder's own index, not an alert's page.
INDEX = "index.md"


def every_alert() -> set[str]:
    """Every alert any configuration can produce: both stacks, and on-prem with the in-cluster SM."""
    configs = [*(observed(stack) for stack in STACKS), sm_in_cluster()]
    return {
        r["alert"]
        for raw in configs
        for g in rule_file(parse_config(raw))["groups"]  # type: ignore[attr-defined]
        for r in g["rules"]
        if "alert" in r
    }


def pages() -> set[str]:
    return {p.stem for p in PAGES.glob("*.md") if p.name != INDEX}


def test_every_alert_has_its_page_and_every_page_its_alert() -> None:
    alerts = every_alert()
    assert len(alerts) >= 17
    assert alerts - pages() == set(), "alerts without a runbook page"
    assert pages() - alerts == set(), "runbook pages of no alert"


@pytest.mark.parametrize("page", sorted(pages()))
def test_a_page_says_what_it_means_how_to_confirm_and_what_to_do(page: str) -> None:
    text = (PAGES / f"{page}.md").read_text()
    assert text.startswith(f"# {page}\n")
    for section in ("## What it means", "## How to confirm", "## What to do"):
        assert section in text, f"{page}: no {section!r}"
    assert "kubectl " in text, f"{page}: no kubectl command"
