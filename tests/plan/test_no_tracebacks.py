"""Bad input by class, each a clean error and never a traceback (issue 35, item 17), each beside the
input just inside the line, which is taken.

Python refuses to read an integer of more than 4300 digits (``sys.get_int_max_str_digits``) with a
``ValueError`` that YAML handlers and version parsers did not expect; ``decimal`` raises on a quantity
past its exponent range; the offline runner nested a frame stack per AKS pool; tarfile refuses an
absolute symlink in the base commit; a closed pipe or a full disk under ``python -m
components.reference``.
"""

from __future__ import annotations

import copy
import io
import subprocess
import sys
import tarfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.guards import kubernetes_version
from components.loader import parse_config
from components.model import elastic, yamlfile
from components.model.errors import ConfigError
from components.plan import diff, writer
from components.plan.offline import run_program
from tests.conftest import ROOT, last_outputs, qualified, raw_stack, stack_path

HUGE = "9" * 5000  # past Python's 4300-digit limit
LARGE = "9" * 4000  # inside it


def _issues(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    return [str(i) for i in err.value.issues]


# ----------------------------------------------------------------------------------------------
# 5000-digit integers: a stack file, a --previous file, a base plan's outputs.yaml


def test_a_5000_digit_integer_is_a_yaml_problem_at_its_position() -> None:
    with pytest.raises(yamlfile.YamlError) as err:
        yamlfile.load(f"a: 1\nb: {HUGE}\n", "f.yaml")
    assert (err.value.where, err.value.why) == (
        "f.yaml:2:4",
        "YAML: an integer of 5000 characters; no config or output value is that large",
    )


def test_a_4000_digit_integer_is_read() -> None:
    assert yamlfile.load(f"b: {LARGE}\nc: 0x1f\n", "f.yaml") == {"b": int(LARGE), "c": 31}


def test_a_stack_file_with_a_5000_digit_integer_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "Pulumi.big.yaml"
    file.write_text((ROOT / "Pulumi.onprem.yaml").read_text() + f"  gpuaas:extra: {HUGE}\n")
    assert writer.main(["onprem", "--stack-file", str(file), "--out", str(tmp_path / "p"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "an integer of 5000 characters" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("digits", "why"),
    [
        (HUGE, ":1:16: YAML: an integer of 5000 characters"),
        (LARGE, ": someOldOutput holds a number no stack output can hold"),
        ("12345678901234567890", None),
    ],
    ids=["5000-digits", "4000-digits", "20-digits"],
)
def test_a_previous_file_with_a_long_integer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], digits: str, why: str | None
) -> None:
    prev = tmp_path / "outputs.yaml"
    prev.write_text(f"someOldOutput: {digits}\n" + yaml.safe_dump(last_outputs("onprem"), sort_keys=False))
    rc = writer.main(
        [
            "onprem",
            "--stack-file",
            str(stack_path("onprem")),
            "--out",
            str(tmp_path / "p"),
            "--quiet",
            "--previous",
            str(prev),
        ]
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if why is not None:
        assert rc == 2 and f"--previous {prev}{why}" in err, err
    else:
        assert rc == 0, err  # a number a double holds (rounded, as the engine would)


def test_a_base_plan_with_a_5000_digit_integer_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base" / "onprem"
    base.mkdir(parents=True)
    (base / "summary.txt").write_text("base\n")
    (base / "outputs.yaml").write_text(f"migLayouts: {HUGE}\n")
    (base / "index.yaml").write_text(f"x: {HUGE}\n")
    rc = diff.main(
        [
            "--stack",
            "onprem",
            "--stack-file",
            str(stack_path("onprem")),
            "--base",
            str(tmp_path / "base"),
            "--out",
            str(tmp_path / "d"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "an integer of 5000 characters" in err and "Traceback" not in err
    # The index is read for grouping only: one past the limit groups the files as unindexed.
    assert diff.compare({"index.yaml": f"x: {HUGE}\n", "a": "1"}, {"a": "2"}).owner == {"a": (None, "(unindexed)")}


# ----------------------------------------------------------------------------------------------
# kubernetesVersion of 5000 digits (the version parsers and the version guard)


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_a_5000_digit_kubernetes_version_is_refused(stack: str) -> None:
    raw = raw_stack(stack)
    raw["platform"]["kubernetesVersion"] = "1." + "3" * 5000 + ".0"
    assert any(i.startswith("gpuaas:platform.kubernetesVersion: ") for i in _issues(raw))


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_a_kubernetes_version_of_ordinary_length_is_read(stack: str) -> None:
    raw = raw_stack(stack)
    raw["platform"]["kubernetesVersion"] = "1.36.3"
    assert parse_config(raw).platform.kubernetes_version == "1.36.3"


def test_the_version_guard_reads_a_5000_digit_last_version_as_no_version() -> None:
    cfg = parse_config(raw_stack("aks"))
    last = {"migLayouts": {}, kubernetes_version.OUTPUT: "1." + "3" * 5000}
    assert kubernetes_version.check(cfg, last) == ([], [])


# ----------------------------------------------------------------------------------------------
# Quantities past what Kubernetes holds (decimal DivisionImpossible / Overflow in the elastic arithmetic)


@pytest.mark.parametrize("memory", ["1e400", "1e2147483648", "9223372036854775808", "8Ei"])
def test_a_quantity_past_int64_is_refused_naming_the_key(memory: str) -> None:
    raw = raw_stack("onprem")
    assert raw["queues"]["elastic"] is True
    raw["teams"][0]["quota"]["memory"] = memory
    raw["teams"][0].setdefault("queue", {})["borrowingLimit"] = {"cpu": memory}
    issues = _issues(raw)
    for key in ("gpuaas:teams[0].quota.memory", "gpuaas:teams[0].queue.borrowingLimit.cpu"):
        assert any(i.startswith(f"{key}: '{memory}' is more than 9223372036854775807 (2^63-1)") for i in issues)


@pytest.mark.parametrize(("memory", "shown"), [("7Ei", "7Ei"), ("9223372036854775807", "9223372036854775807")])
def test_a_quantity_up_to_int64_goes_through_the_elastic_arithmetic(memory: str, shown: str) -> None:
    raw = raw_stack("onprem")
    raw["teams"][0]["quota"]["memory"] = memory
    cfg = parse_config(raw)
    rows = {(f, r): line for f, r, line, _b in elastic.team_rows(cfg, cfg.teams[0])}
    assert elastic.format_quantity(rows[(elastic.ANY_NODE, elastic.MEMORY)].nominal, elastic.MEMORY) == shown
    assert elastic.cohort_totals(cfg)  # sums over every team: no decimal error either
    assert elastic.format_quantity(Decimal(2**63 - 1), elastic.MEMORY) == "9223372036854775807"


# ----------------------------------------------------------------------------------------------
# An AKS stack with as many GPU pools as AKS allows (the offline runner's recursion)


def test_an_aks_stack_with_80_gpu_pools_plans() -> None:
    # AKS allows 100 node pools per cluster (azure-aks-docs quotas-skus-regions.md): 76-99 raised
    # RecursionError in the offline runner, each pool's registration nested inside the last's.
    raw = raw_stack("aks")
    pool = raw["platform"]["gpuPools"][0]
    raw["platform"]["gpuPools"] = [{**copy.deepcopy(pool), "name": f"gp{i:03d}", "maxCount": 1} for i in range(80)]
    team = {**raw["teams"][0], "partition": {"nodePool": "gp000"}, "quota": {"gpus": 8, "rdma": 8}, "verify": False}
    raw["teams"] = [team]
    raw.pop("observability", None)
    run = run_program("aks", config={**qualified(raw), "azure-native:location": "eastus"})
    pools = run.of_type("azure-native:containerservice:AgentPool")
    assert len(pools) == 80 and pools[-1].inputs["agentPoolName"] == "gp079"


# ----------------------------------------------------------------------------------------------
# make diff BASE=<a commit holding an absolute symlink>


def _tar(*members: tuple[str, str | bytes]) -> bytes:
    """A tar like ``git archive`` writes: ``(name, bytes)`` files and ``(name, "-> target")`` symlinks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, what in members:
            info = tarfile.TarInfo(name)
            if isinstance(what, str):
                info.type, info.linkname = tarfile.SYMTYPE, what.removeprefix("-> ")
                tar.addfile(info)
            else:
                info.size = len(what)
                tar.addfile(info, io.BytesIO(what))
    return buf.getvalue()


def test_a_base_commit_with_an_absolute_symlink_is_extracted_without_it(tmp_path: Path) -> None:
    archive = _tar(("Pulumi.onprem.yaml", b"config: {}\n"), ("venv", "-> /usr"), ("up", "-> ../../etc"))
    assert diff.extract(archive, tmp_path) == ["venv", "up"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.onprem.yaml"]


def test_a_base_commit_with_a_link_inside_the_tree_keeps_it(tmp_path: Path) -> None:
    archive = _tar(("Pulumi.onprem.yaml", b"config: {}\n"), ("stack.yaml", "-> Pulumi.onprem.yaml"))
    assert diff.extract(archive, tmp_path) == []
    assert (tmp_path / "stack.yaml").read_text() == "config: {}\n"


def test_a_tar_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        diff.extract(b"not a tar", tmp_path)
    assert str(err.value.issues[0]).startswith("--base: git archive gave a tar that cannot be read")


# ----------------------------------------------------------------------------------------------
# python -m components.reference into a closed pipe or a full disk


def _reference(stdout: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "components.reference"], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, check=False
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux) to stand for a full disk")
def test_the_reference_into_a_full_disk_is_one_line() -> None:
    with open("/dev/full", "wb") as full:
        done = _reference(full)
    assert (done.returncode, done.stderr.decode()) == (
        1,
        "gpuaas: cannot write to standard output: No space left on device\n",
    )


def test_the_reference_into_a_closed_pipe_says_nothing() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "components.reference"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before the tool writes (as `| head -0` would)
    err = proc.stderr.read()
    assert (proc.wait(timeout=120), err) == (1, b"")


def test_the_reference_into_a_file_is_written(tmp_path: Path) -> None:
    with open(tmp_path / "ref.md", "wb") as out:
        done = _reference(out)
    assert (done.returncode, done.stderr) == (0, b"")
    assert (tmp_path / "ref.md").read_text().startswith("#### Top-level keys (`gpuaas:<key>`)")
