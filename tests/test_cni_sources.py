"""The ``cni`` tool set is built from the upstream folder's sources, checked, and never from a copy.

``e2e/toolsets.py`` ``_stage_cni_sources`` runs before any go command: it links ``e2e/cni/upstream``
to ``$GPUAAS_UPSTREAM/src`` only when every file of multus-cni, the attachment-definition client,
ib-sriov-cni and rdma-cni has the blob id the folder's ``MANIFEST-charts-src.tsv`` records, and its
answer (those rows) is part of the set's cache key. Here it runs against copies of the folder's
index and sources made at run time: intact, with a changed byte, with an extra file, without the
folder. No go is needed.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from e2e import toolchain, toolsets
from e2e import upstream as fixtures

CNI = toolchain.TOOLSETS["cni"]


def _copy(upstream: Path, to: Path) -> Path:
    to.mkdir()
    for name in (fixtures.MANIFEST, fixtures.INDEX):
        shutil.copyfile(upstream / name, to / name)
    for d in toolchain.CNI_SOURCES:
        shutil.copytree(upstream / "src" / d, to / "src" / d)
    return to


def _stage(tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setenv(fixtures.ENV, str(folder))
    module = tmp_path / "module"
    module.mkdir(exist_ok=True)
    return toolsets._stage_cni_sources(dataclasses.replace(CNI, module_dir=module))


def test_intact_sources_are_linked_and_their_rows_are_the_key(
    upstream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _copy(upstream, tmp_path / "up")
    rows = _stage(tmp_path, folder, monkeypatch).decode().splitlines()
    assert len(rows) == sum(1 for d in toolchain.CNI_SOURCES for p in (folder / "src" / d).rglob("*") if p.is_file())
    assert "src/multus-cni-v4.3.0/go.mod\t8f18de5fb1cf5f7136e63e12707f42f6e42fcae5" in rows
    link = tmp_path / "module" / "upstream"
    assert link.is_symlink() and os.readlink(link) == str(folder / "src")
    assert (link / "multus-cni-v4.3.0" / "go.mod").is_file()
    # Another folder: the link follows it; the same sources give the same key.
    other = _copy(upstream, tmp_path / "other")
    assert _stage(tmp_path, other, monkeypatch).decode().splitlines() == rows
    assert os.readlink(link) == str(other / "src")


def test_a_changed_or_extra_file_is_refused(upstream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(upstream, tmp_path / "up")
    main_go = folder / "src" / "ib-sriov-cni-v1.3.0" / "cmd" / "ib-sriov-cni" / "main.go"
    main_go.write_text(main_go.read_text().replace('return ""', 'return "02:00:00:00:00:00:00:01"', 1))
    with pytest.raises(SystemExit, match=r"missing or changed \['src/ib-sriov-cni-v1.3.0/cmd/ib-sriov-cni/main.go'\]"):
        _stage(tmp_path, folder, monkeypatch)
    shutil.copyfile(upstream / "src" / "ib-sriov-cni-v1.3.0" / "cmd" / "ib-sriov-cni" / "main.go", main_go)
    (folder / "src" / "multus-cni-v4.3.0" / "pkg" / "k8sclient" / "zz_extra.go").write_text("package k8sclient\n")
    with pytest.raises(SystemExit, match=r"not listed \['src/multus-cni-v4.3.0/pkg/k8sclient/zz_extra.go'\]"):
        _stage(tmp_path, folder, monkeypatch)
    assert not (tmp_path / "module" / "upstream").exists(), "nothing linked to a folder that failed"


def test_without_the_folder_the_build_stops_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(SystemExit) as e:
        _stage(tmp_path, missing, monkeypatch)
    assert str(missing) in str(e.value) and fixtures.ENV in str(e.value)


def test_a_folder_without_the_sources_is_named(upstream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(upstream, tmp_path / "up")
    shutil.rmtree(folder / "src" / "rdma-cni-v1.3.0")
    with pytest.raises(SystemExit, match=r"expected in .*/up/src \(src/rdma-cni-v1.3.0 missing\)"):
        _stage(tmp_path, folder, monkeypatch)


def test_a_copy_in_the_module_is_refused(upstream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(upstream, tmp_path / "up")
    (tmp_path / "module" / "upstream").mkdir(parents=True)
    with pytest.raises(SystemExit, match=r"must be a link .*not a copy"):
        _stage(tmp_path, folder, monkeypatch)


def test_go_mod_replaces_the_four_modules_with_the_link_only() -> None:
    text = (CNI.module_dir / "go.mod").read_text()
    replaces = sorted(line.split("=>")[1].strip() for line in text.splitlines() if "=>" in line)
    assert replaces == sorted(f"./upstream/{d}" for d in toolchain.CNI_SOURCES)
    assert not (CNI.module_dir / "upstream").exists() or (CNI.module_dir / "upstream").is_symlink()
