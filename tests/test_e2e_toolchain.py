"""The e2e tool sets (e2e/toolchain.py) as pinned: offline checks of go.mod files, names and the
minor selection. Building them is `make e2e-tools`; the e2e suite runs what they build."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from e2e import toolchain

ROOT = Path(__file__).resolve().parent.parent


def test_each_minor_has_a_go_mod_pinning_that_minor() -> None:
    for minor, modfile in toolchain.KUBERNETES_MODFILES.items():
        ts = toolchain.controlplane(minor)
        assert ts.modfile == modfile and (ts.module_dir / modfile).is_file()
        assert (ts.module_dir / ts.sumfile).is_file(), ts.sumfile
        version = toolchain.pinned_version(ts)
        assert version.startswith(f"v{minor}."), (minor, version)
        text = (ts.module_dir / modfile).read_text()
        # Generated from that tag's own go.mod (never by hand): etcd's server as the tag pins it.
        assert f"--kubernetes {version}`" in text.splitlines()[0]
        assert re.search(r"^\s*go\.etcd\.io/etcd/server/v3 v3\.\d+\.\d+$", text, re.M)
        # Every staging module is replaced by its published v0.<minor>.<patch>.
        published = "v0." + version.lstrip("v").split(".", 1)[1]
        reps = re.findall(r"^\s*(k8s\.io/\S+) => (k8s\.io/\S+) (\S+)$", text, re.M)
        assert len(reps) >= 31 and all(a == b and v == published for a, b, v in reps), reps


def test_the_default_minor_is_the_newest_and_the_makefile_agrees() -> None:
    minors = sorted(toolchain.KUBERNETES_MODFILES, key=lambda m: tuple(map(int, m.split("."))))
    assert minors[-1] == toolchain.DEFAULT_KUBERNETES
    assert toolchain.KUBERNETES_MODFILES[toolchain.DEFAULT_KUBERNETES] == "go.mod"
    make = (ROOT / "Makefile").read_text()
    assert re.search(rf"^E2E_NEWEST := {re.escape(minors[-1])}$", make, re.M)
    assert re.search(rf"^E2E_OLDEST := {re.escape(minors[0])}$", make, re.M)


def test_the_minor_is_chosen_by_argument_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(toolchain.KUBERNETES_ENV, raising=False)
    assert toolchain.kubernetes_minor() == toolchain.DEFAULT_KUBERNETES
    assert toolchain.kubernetes_minor("v1.35.4") == "1.35"
    monkeypatch.setenv(toolchain.KUBERNETES_ENV, "1.35")
    assert toolchain.controlplane().name == "controlplane-1.35"
    assert toolchain.kubernetes_minor("1.37") == "1.37"
    assert [ts.name for ts in toolchain.e2e_sets() if ts.name.startswith("controlplane")] == ["controlplane-1.35"]
    monkeypatch.setenv(toolchain.KUBERNETES_ENV, "")
    assert {ts.name for ts in toolchain.e2e_sets()} == set(toolchain.TOOLSETS)
    with pytest.raises(SystemExit, match=re.escape("no control plane for Kubernetes '1.30'")):
        toolchain.kubernetes_minor("1.30")


def test_the_multi_call_binary_answers_to_every_tool_name() -> None:
    main = (toolchain.E2E / "controlplane" / "cmd" / "kube" / "main.go").read_text()
    served = set(re.findall(r'^\t"([a-z-]+)": func\(\) int \{$', main, re.M))
    assert served == set(toolchain.CONTROLPLANE_TOOLS)
    (target,) = toolchain.controlplane().targets
    assert target.links == toolchain.CONTROLPLANE_TOOLS


def test_kwok_and_prometheus_are_pinned_in_modules_of_their_own() -> None:
    assert toolchain.pinned_version(toolchain.TOOLSETS["kwok"]) == "v0.8.0"
    assert toolchain.pinned_version(toolchain.TOOLSETS["prometheus"]) == "v0.316.0"
    for name in ("kwok", "prometheus"):
        text = (toolchain.TOOLSETS[name].module_dir / "go.mod").read_text()
        assert "replace" not in text, f"{name}: no replace of the control plane's reaches it"
    assert {t.name for t in toolchain.TOOLSETS["prometheus"].targets} == {"promtool", "prometheus"}
    assert all(t.tags == ("remove_all_sd",) for t in toolchain.TOOLSETS["prometheus"].targets)


def test_staging_replaces_follow_the_tag() -> None:
    upstream = (
        "replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/streaming => ./staging/src/k8s.io/streaming\n)\n"
    )
    assert toolchain.staging_replaces(upstream, "v1.37.2") == [
        ("k8s.io/api", "v0.37.2"),
        ("k8s.io/streaming", "v0.37.2"),
    ]


@pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain (the cache key hashes `go env GOVERSION`)")
def test_each_minor_is_cached_apart_and_only_its_own_go_mod_decides() -> None:
    sets = [toolchain.controlplane(m) for m in toolchain.KUBERNETES_MODFILES]
    dirs = [toolchain.bin_dir(ts) for ts in sets]
    assert len(set(dirs)) == len(dirs)
    for ts, d in zip(sets, dirs, strict=True):
        assert d.parent.name.startswith(f"controlplane-{toolchain.pinned_version(ts)}-")
