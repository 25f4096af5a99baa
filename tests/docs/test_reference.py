"""The reference pages are what the code renders now, and the renderers say what the code has."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.loader import parse_config
from components.observability.groups import rule_groups
from components.observability.promql import Alert
from components.plan import reference_docs
from components.plan.offline import run_program, stack_config
from tests.conftest import raw_stack
from tests.docs.pages import test_stack_file, text


def test_generated_blocks_are_current() -> None:
    assert reference_docs.stale() == [], "run `make reference`"


def test_every_generated_block_is_somewhere() -> None:
    """Each renderer fills a block of some page: none renders into nothing."""
    pages = "".join(p.read_text() for p in reference_docs.pages())
    missing = [name for name in reference_docs.BLOCKS if f"<!-- generated:{name} " not in pages]
    assert missing == []


def test_a_stale_block_is_rewritten_and_an_unknown_one_refused() -> None:
    stale = "x\n<!-- generated:make-targets (make reference) -->\nSTALE-BODY\n<!-- generated:make-targets:end -->\ny\n"
    fresh = reference_docs.refresh(stale)
    assert (
        "STALE-BODY" not in fresh and "| `make plan` |" in fresh and fresh.startswith("x\n") and fresh.endswith("y\n")
    )
    assert reference_docs.refresh(fresh) == fresh
    with pytest.raises(KeyError, match="unknown generated block 'nope'"):
        reference_docs.refresh("<!-- generated:nope x -->\n<!-- generated:nope:end -->")


def test_the_outputs_reference_names_every_output_the_stacks_export() -> None:
    dra = Path(__file__).resolve().parents[1] / "stacks" / "onprem-dra.yaml"
    runs = [
        run_program("onprem", config=stack_config("onprem", test_stack_file("onprem"))),
        run_program("aks", config=stack_config("aks", test_stack_file("aks"))),
        run_program("onprem", config=stack_config("onprem", dra)),
    ]
    exported = {key for run in runs for key in run.outputs}
    assert exported == set(reference_docs.OUTPUTS), "add the output's line to OUTPUTS (reference_docs.py)"


def test_the_alerts_reference_lists_every_alert_of_the_stacks() -> None:
    page = text("docs/reference/alerts.md")
    for stack in ("onprem", "aks"):
        groups = rule_groups(parse_config(raw_stack(stack)))
        names = {r.alert for g in groups.values() for r in g.rules if isinstance(r, Alert)}
        assert names and all(f"`{n}`" in page for n in names), sorted(n for n in names if f"`{n}`" not in page)


def test_an_alert_links_its_runbook_once_the_page_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_docs, "RUNBOOKS", tmp_path)
    assert "](../runbooks/GpuaasGpuXidError.md)" not in reference_docs.alerts_block()
    (tmp_path / "GpuaasGpuXidError.md").write_text("# GpuaasGpuXidError\n")
    assert "[GpuaasGpuXidError](../runbooks/GpuaasGpuXidError.md)" in reference_docs.alerts_block()


def test_the_make_reference_lists_every_documented_target() -> None:
    makefile = (Path(reference_docs.ROOT) / "Makefile").read_text()
    targets = [line[3:].split(":", 1)[0] for line in makefile.splitlines() if line.startswith("## ") and ":" in line]
    documented = [t for t in targets if t.replace("-", "").isalnum()]
    block = reference_docs.make_block()
    assert {"plan", "test", "docs", "reference"} <= set(documented)
    assert all(f"| `make {t}` |" in block for t in documented)


def test_a_model_comment_is_a_key_description() -> None:
    """`#:` lines above a field are its description in the config reference (written once, in the model)."""
    config = text("docs/reference/config.md")
    assert "| `reconfigure` | bool | `False` | Acknowledges that changing this `pkey` or `vfIndex`" in config
