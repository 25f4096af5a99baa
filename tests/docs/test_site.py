"""The docs site builds strictly, and strict means it: an orphan page, a broken anchor fail the
build (each beside its allowed twin); the README stays a front door."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.plan.offline import ROOT

#: What the site's build reads: the site's source and the root files its pages include.
SOURCES = ("mkdocs.yml", "docs", "README.md", "ARCHITECTURE.md", "BENCHMARKS.md")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(ROOT, out)
    assert done.returncode == 0, f"the strict build failed:\n{done.stdout}{done.stderr}"
    assert "WARNING" not in done.stderr, done.stderr
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    built = {p.relative_to(site).parent.as_posix() for p in site.rglob("index.html")}
    wanted = {
        "guides/onprem", "guides/aks", "guides/teams", "guides/day2", "guides/review", "guides/components",
        "guides/observability", "guides/removing", "troubleshooting", "runbooks", "reference/config",
        "reference/outputs", "reference/alerts", "reference/make", "reference/versions", "architecture",
        "contributing", "contributing/tests", "benchmarks", "changelog",
    }  # fmt: skip
    assert wanted <= built, f"missing pages: {sorted(wanted - built)}"


def test_architecture_and_benchmarks_are_included_not_copied(site: Path) -> None:
    """The root files are the source; the architecture page leaves out their history."""
    arch = (site / "architecture" / "index.html").read_text()
    assert "Code map, top to bottom" in arch
    assert "The move changed these plan lines" not in arch and "issue #20" not in arch
    bench = (site / "benchmarks" / "index.html").read_text()
    first = re.search(r"^## (.+)$", (ROOT / "BENCHMARKS.md").read_text(), re.M)
    assert first is not None and first.group(1).split("`")[0].strip() in bench
    assert not (ROOT / "docs" / "ARCHITECTURE.md").exists() and not (ROOT / "docs" / "BENCHMARKS.md").exists()


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The site's sources in a folder of their own, to break."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name)
        else:
            shutil.copy2(src, root / name)
    return root


def test_a_page_left_out_of_the_nav_fails_the_build(copy: Path, tmp_path: Path) -> None:
    (copy / "docs" / "concepts" / "stray.md").write_text("# Stray\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert 'not included in the "nav"' in done.stderr and "concepts/stray.md" in done.stderr
    # Its allowed twin: the same page with its nav line builds.
    yml = (copy / "mkdocs.yml").read_text()
    anchor = "      - Reading the proofs: concepts/proofs.md\n"
    assert anchor in yml
    (copy / "mkdocs.yml").write_text(yml.replace(anchor, anchor + "      - Stray: concepts/stray.md\n"))
    done = build(copy, tmp_path / "site")
    assert done.returncode == 0, done.stderr


def test_a_link_to_a_missing_heading_fails_the_build(copy: Path, tmp_path: Path) -> None:
    page = copy / "docs" / "index.md"
    page.write_text(page.read_text() + "\n[drain](troubleshooting.md#no-such-heading)\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0 and "does not contain an anchor '#no-such-heading'" in done.stderr
    page.write_text(page.read_text().replace("#no-such-heading", "#a-mig-change-needs-a-drain"))
    assert build(copy, tmp_path / "site").returncode == 0


def test_a_runbook_joins_the_nav_by_itself(copy: Path, tmp_path: Path) -> None:
    (copy / "docs" / "runbooks" / "GpuaasZzzTest.md").write_text("# GpuaasZzzTest\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert 'href="runbooks/GpuaasZzzTest/"' in (tmp_path / "site" / "index.html").read_text()


def _hook() -> object:
    spec = importlib.util.spec_from_file_location("runbooks_nav", ROOT / "docs" / "hooks" / "runbooks_nav.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runbooks_keep_the_listed_pages_first_and_the_rest_by_name(tmp_path: Path) -> None:
    (tmp_path / "runbooks").mkdir()
    for name in ("index", "GpuaasB", "GpuaasA", "GpuaasC"):
        (tmp_path / "runbooks" / f"{name}.md").write_text(f"# {name}\n")
    listed = ["runbooks/index.md", {"C first": "runbooks/GpuaasC.md"}]
    got = _hook().runbook_pages(tmp_path, listed)  # type: ignore[attr-defined]
    assert got == [*listed, "runbooks/GpuaasA.md", "runbooks/GpuaasB.md"]


README_BUDGET = 200
#: What only a contributor needs: the test suite's internals and fixtures, which the README leaves to the site.
CONTRIBUTOR_ONLY = ("e2e", "tool set", "GPUAAS_UPSTREAM", "upstream fixtures", "KWOK", "lint-imports")


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_BUDGET
    found = [w for w in CONTRIBUTOR_ONLY if w.lower() in readme.lower()]
    assert found == [], f"contributor detail in the README: {found}"
    links = re.findall(r"\]\(((?:docs/)[^)#]+)", readme)
    assert links and all((ROOT / link).is_file() for link in links), links
