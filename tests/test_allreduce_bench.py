"""workloads/allreduce_bench.py: its arithmetic by hand, and a real two-process gloo run on CPU."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
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


# nccl-tests doc/PERFORMANCE.md, "Summary": AllReduce 2(n-1)/n, ReduceScatter (n-1)/n, AllGather (n-1)/n.
@pytest.mark.parametrize(
    ("op", "world", "factor"),
    [
        ("all_reduce", 8, 14 / 8),
        ("all_gather", 1, 0.0),
        ("all_gather", 2, 0.5),
        ("all_gather", 8, 7 / 8),
        ("reduce_scatter", 4, 0.75),
        ("reduce_scatter", 16, 15 / 16),
    ],
)
def test_bus_factors_are_nccl_tests(op: str, world: int, factor: float) -> None:
    assert bench.bus_factor(op, world) == pytest.approx(factor)


def test_all_gather_busbw_by_hand() -> None:
    # S = 1 GiB gathered over 8 ranks in 25 ms: algbw 1073741824 / 0.025 = 42.94967296 GB/s; × 7/8.
    assert bench.busbw_gbps(1 << 30, 0.025, 8, "all_gather") == pytest.approx(37.58096384)


def test_unknown_collective_is_refused() -> None:
    with pytest.raises(ValueError, match="known: all_reduce, all_gather, reduce_scatter"):
        bench.bus_factor("broadcast", 2)


@pytest.mark.parametrize(
    ("op", "nbytes", "world", "send", "recv", "size"),
    [
        ("all_reduce", 4096, 3, 1024, 1024, 4096),
        ("all_gather", 4096, 4, 256, 1024, 4096),  # each rank sends S/n, receives S
        ("reduce_scatter", 4096, 4, 1024, 256, 4096),  # each rank sends S, receives S/n
        ("all_gather", 4096, 3, 341, 1023, 4092),  # rounded down to whole elements per rank
    ],
)
def test_collective_sizes_follow_nccl_tests(op: str, nbytes: int, world: int, send: int, recv: int, size: int) -> None:
    got = bench.coll_size(op, nbytes, world)
    assert (got.send_count, got.recv_count, got.nbytes) == (send, recv, size)


def test_collective_smaller_than_one_element_per_rank_is_refused() -> None:
    with pytest.raises(ValueError, match="no element per rank"):
        bench.coll_size("all_gather", 8, 4)
    assert bench.coll_size("all_gather", 16, 4).send_count == 1


def test_expected_results_of_the_check() -> None:
    assert bench.expected_chunks("all_reduce", 4) == [10.0]
    assert bench.expected_chunks("reduce_scatter", 4) == [10.0]
    assert bench.expected_chunks("all_gather", 3) == [1.0, 2.0, 3.0]


def test_placements_out_of_place_first_all_reduce_in_place_only() -> None:
    assert bench.in_place_supported("all_reduce") == (True,)
    assert bench.in_place_supported("all_gather") == (False, True)


def test_ops_default_by_backend() -> None:
    assert bench.pick_ops(None, "nccl") == ["all_reduce", "all_gather", "reduce_scatter"]
    assert bench.pick_ops(None, "gloo") == ["all_reduce"]
    assert bench.pick_ops("reduce_scatter, all_reduce,all_reduce", "gloo") == ["reduce_scatter", "all_reduce"]
    with pytest.raises(ValueError, match="known collectives"):
        bench.pick_ops("alltoall", "nccl")


# --------------------------------------------------------------------------------------------
# The timing loops, with a fake device: its clock advances only when a collective runs


class FakeDevice:
    """A device clock (seconds) and a log of everything the loops do, in order."""

    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[tuple[str, ...]] = []


class FakeEvent:
    def __init__(self, dev: FakeDevice, name: str) -> None:
        self.dev, self.name, self.at = dev, name, None

    def record(self) -> None:
        self.at = self.dev.now
        self.dev.log.append(("record", self.name))

    def synchronize(self) -> None:
        self.dev.log.append(("event-sync", self.name))

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None
        return (end.at - self.at) * 1e3  # ms


class FakeComm:
    """One rank of ``world``; every other rank is ``slower`` times as slow. A call of S bytes takes S ns
    (1 GB/s algbw) in place and twice that out of place."""

    def __init__(self, world: int, slower: float = 1.25) -> None:
        self.rank, self.world, self.slower = 0, world, slower
        self.dev = FakeDevice()
        self.events = 0

    def _run(self, size: bench.CollSize, in_place: bool) -> None:
        self.dev.now += size.nbytes * 1e-9 * (1 if in_place else 2)
        self.dev.log.append(("launch", size.op, str(size.nbytes), "ip" if in_place else "oop"))

    def prepare(self, size: bench.CollSize, in_place: bool) -> Callable[[], None]:
        return lambda: self._run(size, in_place)

    def check(self, size: bench.CollSize, in_place: bool) -> None:
        self.dev.log.append(("check", size.op, str(size.nbytes), "ip" if in_place else "oop"))

    def rescale(self) -> None:
        self.dev.log.append(("rescale",))

    def sync(self) -> None:
        self.dev.log.append(("sync",))

    def barrier(self) -> None:
        self.dev.log.append(("barrier",))

    def new_event(self) -> FakeEvent:
        self.events += 1
        return FakeEvent(self.dev, f"e{self.events}")

    def reduce_times(self, values: list[float], how: str) -> list[float]:
        self.dev.log.append(("reduce", how, str(len(values))))
        others = [v * self.slower for v in values]
        if how == "max":
            return [max(a, b) for a, b in zip(values, others, strict=True)]
        return [(a + b * (self.world - 1)) / self.world for a, b in zip(values, others, strict=True)]


def _batches(log: list[tuple[str, ...]]) -> list[list[tuple[str, ...]]]:
    """What happened between each batch's two event records."""
    out, inside = [], None
    for entry in log:
        if entry[0] == "record":
            if inside is None:
                inside = []
            else:
                out.append(inside)
                inside = None
        elif inside is not None:
            inside.append(entry)
    return out


def test_batch_mode_times_one_event_pair_around_the_whole_batch() -> None:
    comm = FakeComm(world=8)
    ops, sizes = ["all_reduce", "all_gather"], [MIB, 4 * MIB]
    bench.measure_bandwidth(comm, ops, sizes, warmup=3, iters=20, mode="batch", rank_time="max")
    placements = 2 * 1 + 2 * 2  # all_reduce in place; all_gather out of and in place
    assert comm.events == 2 * placements  # one pair per batch, not per call
    batches = _batches(comm.dev.log)
    assert len(batches) == placements
    for inside in batches:
        # Nothing but the 20 calls inside a batch: no sync, no barrier, no rescale, no host clock.
        assert len(inside) == 20 and {e[0] for e in inside} == {"launch"} and len(set(inside)) == 1
    # Before each batch: the check, the warm-up calls, a device sync and a barrier; after it the stop
    # event is waited for; the cross-rank reduction happens once, at the very end.
    log = comm.dev.log
    first = log.index(("record", "e1"))
    assert log[:first] == [("check", "all_reduce", str(MIB), "ip")] + [("launch", "all_reduce", str(MIB), "ip")] * 3 + [
        ("sync",),
        ("barrier",),
    ]
    assert log[first + 21 : first + 23] == [("record", "e2"), ("event-sync", "e2")]
    assert [e for e in log if e[0] == "reduce"] == [("reduce", "max", str(placements))] and log[-1][0] == "reduce"


def test_batch_mode_arithmetic_is_the_slowest_ranks_time_over_the_batch() -> None:
    comm = FakeComm(world=8, slower=1.25)
    (ar, ag) = bench.measure_bandwidth(
        comm, ["all_reduce", "all_gather"], [256 * MIB], warmup=1, iters=10, mode="batch", rank_time="max"
    )
    # all_reduce, in place: 268435456 ns = 0.268435456 s per call here, 1.25 × that on the slowest rank:
    # 0.33554432 s → algbw 0.8 GB/s, busbw 0.8 × 7/4 = 1.4 GB/s.
    assert (ar.op, ar.iters, ar.mode, ar.oop) == ("all_reduce", 10, "batch", None)
    assert (ar.time_us, ar.algbw_gbps, ar.busbw_gbps) == pytest.approx((335544.32, 0.8, 1.4))
    # all_gather: in place as above with factor 7/8 → 0.7; out of place twice the time → 0.35.
    assert (ag.algbw_gbps, ag.busbw_gbps) == pytest.approx((0.8, 0.7))
    assert ag.oop is not None and (ag.oop.time_us, ag.oop.busbw_gbps) == pytest.approx((671088.64, 0.35))


def test_rank_time_avg_is_the_mean_over_ranks() -> None:
    comm = FakeComm(world=4, slower=2.0)
    (row,) = bench.measure_bandwidth(comm, ["all_reduce"], [MIB], warmup=0, iters=5, mode="batch", rank_time="avg")
    # (1 + 3 × 2) / 4 = 1.75 × 1048576 ns.
    assert row.time_us == pytest.approx(1048.576 * 1.75)


def test_per_call_mode_syncs_around_every_call() -> None:
    comm = FakeComm(world=2, slower=1.0)
    (row,) = bench.measure_bandwidth(
        comm, ["all_reduce"], [MIB], warmup=0, iters=4, mode="per-call", rank_time="max", clock=lambda: comm.dev.now
    )
    assert comm.events == 0
    # The mean of the 4 calls' host-clock times: 1048576 B in 1048576 ns each → 1 GB/s, busbw the same at n = 2.
    assert (row.time_us, row.busbw_gbps) == pytest.approx((1048.576, 1.0))
    log = comm.dev.log
    start = log.index(("barrier",)) + 1
    call = [("sync",), ("launch", "all_reduce", str(MIB), "ip"), ("sync",), ("rescale",)]
    assert log[start : start + 16] == call * 4
    assert (row.mode, row.iters) == ("per-call", 4)


def test_per_call_times_with_a_fake_clock() -> None:
    ticks = iter([0.0, 0.5, 1.0, 1.75, 2.0, 4.0])
    got = bench.time_per_call(lambda: None, lambda: None, lambda: None, 3, clock=lambda: next(ticks))
    assert got == [0.5, 0.75, 2.0]


def test_time_batch_divides_by_the_batch() -> None:
    dev = FakeDevice()

    def launch() -> None:
        dev.now += 0.002

    assert bench.time_batch(launch, lambda: FakeEvent(dev, "e"), 50) == pytest.approx(0.002)
    with pytest.raises(ValueError, match="at least one call"):
        bench.time_batch(launch, lambda: FakeEvent(dev, "e"), 0)


def test_host_event_for_gloo() -> None:
    ticks = iter([10.0, 10.25])
    a, b = bench.HostEvent(lambda: next(ticks)), bench.HostEvent(lambda: 0.0)
    b._clock = lambda: next(ticks)
    a.record()
    b.record()
    assert a.elapsed_time(b) == pytest.approx(250.0)
    with pytest.raises(RuntimeError, match="never recorded"):
        bench.HostEvent().elapsed_time(bench.HostEvent())


def test_latency_is_per_call_and_the_slowest_rank() -> None:
    comm = FakeComm(world=2, slower=3.0)
    (row,) = bench.measure_latency(comm, [1024], warmup=2, iters=10, clock=lambda: comm.dev.now)
    # 1024 ns per call here, 3072 ns on the other rank: every percentile is 3.072 µs.
    assert (row.nbytes, row.iters) == (1024, 10)
    assert (row.p50_us, row.p99_us) == pytest.approx((3.072, 3.072))
    assert comm.events == 0


def test_report_summary_and_tables() -> None:
    comm = FakeComm(world=8)
    rows = bench.measure_bandwidth(
        comm, ["all_reduce", "reduce_scatter"], [MIB, 2 * MIB], warmup=0, iters=2, mode="batch", rank_time="max"
    )
    report = bench.Report("gdr", "nccl", 8, "h", "H200", "2.11", "2.28.9", bandwidth=rows)
    report.latency = bench.measure_latency(comm, [8, 16], warmup=0, iters=3, clock=lambda: comm.dev.now)
    args = bench.parse_args(["--min-busbw-gbps", "1.0"])
    bench.finish(report, args, None)
    # all_reduce: 1 GB/s here, 0.8 on the slowest rank, × 7/4 = 1.4 at every size.
    assert report.peak_busbw_gbps == pytest.approx(1.4) and report.avg_busbw_gbps == pytest.approx(1.4)
    assert report.peak_busbw_by_op == pytest.approx({"all_reduce": 1.4, "reduce_scatter": 0.7})
    assert report.busbw_ok is True and report.passed
    summary = report.summary()
    assert (summary["bw_mode"], summary["rank_time"], summary["latency_nbytes"]) == ("batch", "max", 8)
    text = bench.format_tables(report)
    assert "# all_reduce" in text and "# reduce_scatter" in text and "p99_us" in text
    assert "bw-mode=batch rank-time=max" in text


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


def test_bandwidth_row_in_place_and_out_of_place() -> None:
    # reduce_scatter, n = 8: factor 7/8. 256 MiB in 10 ms in place, 20 ms out of place.
    row = bench.bandwidth_row("reduce_scatter", 256 * MIB, 8, "batch", 20, 0.010, 0.020)
    assert (row.time_us, row.algbw_gbps, row.busbw_gbps) == pytest.approx((10_000, 26.8435456, 23.4881024))
    assert row.oop is not None
    assert (row.oop.time_us, row.oop.busbw_gbps) == pytest.approx((20_000, 23.4881024 / 2))
    assert bench.bandwidth_row("all_reduce", MIB, 2, "batch", 20, 1e-4).oop is None


def test_default_sizes_reach_1_gib_and_8_b_to_16_kib() -> None:
    args = bench.parse_args([])
    assert bench.powers_of_two(args.min_bytes, args.max_bytes) == [MIB << i for i in range(11)]
    assert bench.powers_of_two(args.lat_min_bytes, args.lat_max_bytes) == [8 << i for i in range(12)]
    assert (args.iters, args.lat_iters, args.bw_mode, args.rank_time) == (20, 100, "batch", "max")


@pytest.mark.parametrize(
    ("text", "value"), [("4096", 4096), ("16M", 16 * MIB), ("1G", 1 << 30), ("256MiB", 256 * MIB), ("8k", 8192)]
)
def test_sizes_as_nccl_tests_writes_them(text: str, value: int) -> None:
    assert bench.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "1.5G", "-1", "12XB", "1T"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        bench.parse_size(text)


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
    rows = [bench.bandwidth_row("all_reduce", 256 * MIB, 8, "batch", 20, 0.010)]  # 46.98 GB/s
    # Another collective's higher busbw does not count: the judged number is all_reduce's.
    rows.append(bench.bandwidth_row("all_gather", 256 * MIB, 8, "batch", 20, 0.001))
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
