"""workloads/allreduce_bench.py: its arithmetic by hand, and a real two-process gloo run on CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "workloads" / "allreduce_bench.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("allreduce_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["allreduce_bench"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


bench = _load()
MIB = 1 << 20


# --------------------------------------------------------------------------------------------
# Arithmetic against hand-computed values


def test_256_mib_in_10_ms_on_8_ranks() -> None:
    # 268435456 B / 0.010 s = 26.8435456e9 B/s; × 2·7/8 = 1.75 → 46.9762048 GB/s.
    assert bench.algbw_gbps(256 * MIB, 0.010) == pytest.approx(26.8435456)
    assert bench.busbw_gbps(256 * MIB, 0.010, 8) == pytest.approx(46.9762048)


@pytest.mark.parametrize(
    ("world", "factor"),
    [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (16, 1.875)],
)
def test_busbw_factor_is_nccl_tests_all_reduce(world: int, factor: float) -> None:
    assert bench.busbw_factor(world) == pytest.approx(factor)


def test_two_ranks_busbw_equals_algbw() -> None:
    # n = 2: each rank sends and receives half twice — busbw = algbw.
    assert bench.busbw_gbps(1 * MIB, 1e-4, 2) == pytest.approx(bench.algbw_gbps(1 * MIB, 1e-4))
    assert bench.algbw_gbps(1 * MIB, 1e-4) == pytest.approx(10.48576)


def test_percentiles_match_numpy_linear() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert bench.percentile(values, 50) == pytest.approx(50.5)
    assert bench.percentile(values, 99) == pytest.approx(99.01)
    assert bench.percentile([3.0], 99) == 3.0
    assert bench.percentile([4.0, 1.0, 2.0, 3.0], 0) == 1.0
    assert bench.percentile([4.0, 1.0, 2.0, 3.0], 100) == 4.0


def test_latency_row_in_microseconds() -> None:
    times = [i * 1e-6 for i in range(1, 101)]  # 1..100 µs
    row = bench.latency_row(8, times)
    assert (row.p50_us, row.p99_us, row.mean_us) == pytest.approx((50.5, 99.01, 50.5))


def test_bandwidth_row_uses_mean_and_best() -> None:
    row = bench.bandwidth_row(256 * MIB, [0.010, 0.020, 0.030], 8)
    assert row.time_us_mean == pytest.approx(20_000)
    assert row.busbw_gbps == pytest.approx(46.9762048 / 2)
    assert row.busbw_gbps_best == pytest.approx(46.9762048)


def test_default_sizes_are_1_to_256_mib_and_8_b_to_16_kib() -> None:
    args = bench.parse_args([])
    assert bench.powers_of_two(args.min_bytes, args.max_bytes) == [MIB << i for i in range(9)]
    assert bench.powers_of_two(args.lat_min_bytes, args.lat_max_bytes) == [8 << i for i in range(12)]
    assert (args.iters, args.lat_iters) == (20, 100)


@pytest.mark.parametrize(("lo", "hi"), [(3, 8), (0, 8), (16, 8)])
def test_bad_size_ranges(lo: int, hi: int) -> None:
    with pytest.raises(ValueError):
        bench.powers_of_two(lo, hi)


def test_time_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        bench.algbw_gbps(1, 0.0)


# --------------------------------------------------------------------------------------------
# Environment and verdicts


@pytest.mark.parametrize(
    ("env", "rank", "world"),
    [
        ({}, 0, 1),
        ({"RANK": "1", "WORLD_SIZE": "2"}, 1, 2),
        ({"JOB_COMPLETION_INDEX": "1", "WORLD_SIZE": "2"}, 1, 2),  # Indexed Job
        ({"RANK": "0", "JOB_COMPLETION_INDEX": "1", "WORLD_SIZE": "2"}, 0, 2),  # RANK wins
    ],
)
def test_rank_from_torchrun_or_indexed_job(env: dict[str, str], rank: int, world: int) -> None:
    got = bench.dist_env(env)
    assert (got.rank, got.world) == (rank, world)


def test_rank_outside_world_is_refused() -> None:
    with pytest.raises(ValueError, match="outside world size"):
        bench.dist_env({"RANK": "2", "WORLD_SIZE": "2"})


def test_backend_choice() -> None:
    assert bench.pick_backend("auto", True) == "nccl"
    assert bench.pick_backend("auto", False) == "gloo"
    with pytest.raises(ValueError, match="CUDA"):
        bench.pick_backend("nccl", False)


NCCL_LOG = """\
node-a:123:130 [0] NCCL INFO NCCL version 2.27.7+cuda12.9
node-a:123:130 [0] NCCL INFO NET/IB : Using [0]mlx5_4:1/IB ; OOB net1:192.168.1.10<0>
node-a:123:131 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node-a:123:131 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
"""


def test_gdrdma_and_transports_from_the_nccl_log() -> None:
    assert bench.gdrdma_in_log(NCCL_LOG)
    assert bench.nccl_transports(NCCL_LOG) == ["NET/IB/0/GDRDMA"]
    no_gdr = NCCL_LOG.replace("/GDRDMA", "")
    assert not bench.gdrdma_in_log(no_gdr)
    assert bench.nccl_transports(no_gdr) == ["NET/IB/0"]
    assert bench.nccl_transports("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read") == ["P2P/CUMEM/read"]


def test_verdicts() -> None:
    rows = [bench.bandwidth_row(256 * MIB, [0.010], 8)]  # 46.98 GB/s
    assert bench.verdict(rows, None) is None
    assert bench.verdict(rows, 42.5) is True
    assert bench.verdict(rows, 50.0) is False
    args = bench.parse_args(["--min-busbw-gbps", "42.5", "--nccl-log", "x", "--require-gdrdma"])
    report = bench.Report("gdr", "nccl", 8, "h", "d", "t", "2.27", bandwidth=rows)
    assert bench.finish(report, args, [NCCL_LOG]).passed
    assert not bench.finish(report, args, [NCCL_LOG.replace("/GDRDMA", "")]).passed


# --------------------------------------------------------------------------------------------
# Two processes, gloo, CPU: what CI can run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_two(tmp_path: Path, *extra: str) -> list[subprocess.CompletedProcess[str]]:
    pytest.importorskip("torch")
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        cmd = [sys.executable, str(SCRIPT), "--backend", "gloo", "--min-bytes", "4096", "--max-bytes", "16384"]
        cmd += ["--iters", "3", "--warmup", "1", "--lat-max-bytes", "64", "--lat-iters", "5", *extra]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    done = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def test_two_gloo_ranks_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    rank0, rank1 = _run_two(tmp_path, "--json", str(out), "--label", "ci")
    assert (rank0.returncode, rank1.returncode) == (0, 0), rank0.stderr + rank1.stderr
    report = json.loads(out.read_text())
    assert (report["backend"], report["world_size"], report["label"]) == ("gloo", 2, "ci")
    assert [r["nbytes"] for r in report["bandwidth"]] == [4096, 8192, 16384]
    assert [r["nbytes"] for r in report["latency"]] == [8, 16, 32, 64]
    for row in report["bandwidth"]:
        assert row["iters"] == 3 and row["busbw_gbps"] > 0
        # n = 2: busbw = algbw.
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])
    for row in report["latency"]:
        assert row["iters"] == 5 and 0 < row["p50_us"] <= row["p99_us"]
    assert "busbw GB/s" in rank0.stdout and "p99_us" in rank0.stdout
    summaries = [
        json.loads(line.split(" ", 1)[1])
        for line in (rank0.stdout + rank1.stdout).splitlines()
        if line.startswith(bench.RESULT_MARK)
    ]
    assert sorted(s["rank"] for s in summaries) == [0, 1]
    assert all(s["passed"] for s in summaries)


def test_threshold_failure_exits_1_on_every_rank(tmp_path: Path) -> None:
    rank0, rank1 = _run_two(tmp_path, "--min-busbw-gbps", "1e9", "--lat-iters", "0")
    assert (rank0.returncode, rank1.returncode) == (1, 1), rank0.stderr + rank1.stderr
    assert "FAIL" in rank0.stdout
