"""The suite cannot pass by not running (issue #21, item 16).

Each case runs pytest (or make) in a subprocess with the environment under test: the upstream
fixtures folder absent (an empty folder as ``GPUAAS_UPSTREAM``), the explicit opt-out, a file that
is not upstream's, and an e2e test that skips under CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from e2e import upstream as up  # the tests' `upstream` is the fixture (the folder)
from tests.conftest import ROOT
from tests.run_guards import MACHINE_DEPENDENT

CLEAN = {k: v for k, v in os.environ.items() if k not in (up.ENV, up.OPT_OUT, "CI")}


def _pytest(args: list[str], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args],
        cwd=ROOT,
        env={**CLEAN, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stdout + result.stderr).strip().splitlines()[-1]


# One small test file that reads the upstream folder, and one that does not.
NEEDS = "tests/operators/test_rdma_shared_device_plugin.py"
NEEDS_NOT = "tests/model/test_types.py"


def test_without_the_folder_every_run_fails_naming_the_folder_and_the_variable(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    for target in (NEEDS, NEEDS_NOT):
        result = _pytest([target], {up.ENV: str(empty)})
        out = result.stdout + result.stderr
        assert result.returncode != 0, out
        assert str(empty) in out and up.ENV in out and up.OPT_OUT in out
        assert "passed" not in out


def test_the_opt_out_skips_what_needs_the_folder_and_says_so_last(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    result = _pytest([NEEDS], {up.ENV: str(empty), up.OPT_OUT: "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert " skipped" in result.stdout
    last = _last_line(result)
    assert last.startswith(f"{up.OPT_OUT}=1: ") and "DID NOT RUN" in last
    assert last == last.upper().replace(str(empty).upper(), str(empty))  # capitals, but the path as it is
    count = int(last.split(": ")[1].split()[0])
    assert count > 0


def test_with_the_folder_the_same_file_runs_whole(upstream: Path) -> None:
    """The allowed twin of the two above: no skip, no failure, no capitals."""
    whole = _pytest([NEEDS], {up.ENV: str(upstream)})
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert " skipped" not in whole.stdout and "DID NOT RUN" not in whole.stdout


def test_make_unit_fails_without_the_folder(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not installed: `make unit` is what CI runs")
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    # -o: the virtualenv and the repo-local tools are there already (this suite runs in them).
    result = subprocess.run(
        ["make", "-o", ".venv/.installed", "-o", "tools/node_modules/.installed", "unit", f"UPSTREAM={empty}"],
        cwd=ROOT,
        env=CLEAN,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert str(empty) in out and up.ENV in out


def test_blob_id_is_git_hash_object() -> None:
    # git's own well-known ids: the empty blob, and "hello\n" (git hash-object on both).
    assert up.blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert up.blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def _partial_copy(src: Path, dest: Path, *files: str) -> Path:
    for rel in (up.MANIFEST, up.INDEX, *files):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, dest / rel)
    return dest


CRD = "kueue/v0.19.2/crds/kueue.x-k8s.io_clusterqueues.yaml"  # listed in the README's table
CHART = "charts/kueue-v0.19.2/Chart.yaml"  # listed in the manifest


def test_a_file_that_is_not_upstreams_fails_the_test_that_reads_it(
    upstream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _partial_copy(upstream, tmp_path / "up", CRD, CHART)
    monkeypatch.setenv(up.ENV, str(folder))
    assert up.require(CRD) == folder / CRD and up.require(CHART) == folder / CHART
    assert up.root() / "kueue" / "v0.19.2" == folder / "kueue/v0.19.2"

    changed = _partial_copy(upstream, tmp_path / "changed", CRD)
    (changed / CRD).write_bytes((changed / CRD).read_bytes() + b"\n")
    stray = changed / "kueue/v0.19.2/crds/extra.yaml"
    stray.write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setenv(up.ENV, str(changed))
    with pytest.raises(up.UpstreamError, match="differs from upstream: blob"):
        up.require(CRD)
    with pytest.raises(up.UpstreamError, match="is not an upstream file"):
        up.require("kueue/v0.19.2/crds/extra.yaml")
    with pytest.raises(up.UpstreamError, match=r"is not an upstream file|differs"):
        _ = up.root() / "kueue"  # a folder is checked file by file
    with pytest.raises(up.UpstreamError, match=rf"is not in the upstream fixtures folder .*\${up.ENV}"):
        up.require(CHART)
    with pytest.raises(up.UpstreamError, match=r"has no '\.\.'"):
        up.require("../etc/passwd")


def test_the_whole_folder_is_upstreams(upstream: Path) -> None:
    """Every file of the folder this suite reads is listed and byte-identical."""
    root = up.require("")
    listed = up.blob_ids()
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert files - {up.MANIFEST, up.INDEX} == set(listed)


E2E_SKIP = """
    import pytest

    from tests.run_guards import skip_machine

    pytestmark = pytest.mark.e2e

    def test_skipped_for_no_reason_ci_accepts() -> None:
        pytest.skip("the tool was not built")

    def test_skipped_for_a_machine_reason() -> None:
        skip_machine("network namespaces", "unshare -n: Operation not permitted")

    def test_runs() -> None:
        assert True
"""


@pytest.fixture
def probe(tmp_path: Path) -> Callable[[str], list[str]]:
    """Write a test file under ``tmp_path``; the pytest arguments that run it under this suite's hooks
    (``-p tests.conftest`` loads them as a plugin: the file is outside the repository)."""

    def write(body: str) -> list[str]:
        path = tmp_path / "test_probe.py"
        path.write_text(textwrap.dedent(body))
        return ["-p", "tests.conftest", "--rootdir", str(tmp_path), str(path)]

    return write


def test_an_e2e_skip_fails_the_run_under_ci_unless_machine_dependent(probe: Callable[[str], list[str]]) -> None:
    args = probe(E2E_SKIP)
    ci = _pytest(args, {"CI": "true"})
    out = ci.stdout + ci.stderr
    assert ci.returncode == 1, out
    assert "1 e2e test(s) skipped under CI" in out and "the tool was not built" in out
    assert "test_skipped_for_a_machine_reason" not in out.split("skipped under CI")[1]
    # the allowed twins: the same file outside CI, and under CI with only the machine-dependent skip
    assert _pytest(args, {}).returncode == 0
    only_machine = _pytest([*args, "-k", "not no_reason"], {"CI": "true"})
    assert only_machine.returncode == 0, only_machine.stdout + only_machine.stderr


def test_machine_dependent_skips_are_a_named_list_with_reasons(probe: Callable[[str], list[str]]) -> None:
    assert MACHINE_DEPENDENT and all(len(why) > 40 for why in MACHINE_DEPENDENT.values())
    args = probe(
        """
        from tests.run_guards import skip_machine

        def test_unknown_case() -> None:
            skip_machine("slow disks", "no")
        """
    )
    result = _pytest(args, {})
    assert result.returncode == 1 and "is not a machine-dependent case" in result.stdout
