#!/usr/bin/env python3
"""NCCL collectives' bus bandwidth (nccl-tests' method) and all_reduce latency over torch.distributed.

Standalone on purpose (standard library + torch): gpuaas mounts this file into the NCCL
verification pods from a ConfigMap, and CI runs it on CPU with gloo.

* bandwidth (``--bw-mode batch``, the default; NVIDIA/nccl-tests ``src/common.cu`` ``BenchTime``):
  per collective (``--ops``, default all_reduce, all_gather and reduce_scatter under NCCL) and size
  (``--min-bytes``..``--max-bytes``, powers of two, default 1 MiB..1 GiB), ``--warmup`` untimed calls,
  one synchronized start across ranks, then ONE pair of device events around ``--iters`` back-to-back
  calls (default 20); the time of one call is the pair's elapsed time over ``--iters``. (nccl-tests
  reads a host timer started before the first launch, after a stream synchronize; the events time the
  same span on the device, without the first launch.) Out-of-place and
  in-place, as nccl-tests prints them. torch.distributed has no out-of-place all_reduce (``all_reduce``
  writes into its input), so all_reduce has the in-place column only. ``--bw-mode per-call`` times
  every call on the host between two device synchronizations instead (the older method: it reads
  below nccl-tests, the synchronizations and launch gaps are inside every sample).
* latency (always per call: percentiles need one sample per call): all_reduce of ``--lat-min-bytes``..
  ``--lat-max-bytes`` (defaults 8 B..16 KiB), ``--lat-iters`` calls (default 100), p50 and p99.

A time is the slowest rank's (``--rank-time max``, a MAX all_reduce of the per-rank times: the collective
is done when every rank has its result). nccl-tests averages the ranks' times by default (``-a 1``);
``--rank-time avg`` does the same, and ``all_reduce_perf -a 3`` reports the slowest rank like us.

Sizes are nccl-tests' S, the whole array (``getCollByteCount``): all_reduce sends and receives S per rank,
all_gather sends S/n and receives S, reduce_scatter sends S and receives S/n (rounded down to whole
float32 elements per rank). algbw = S / time; busbw = algbw × the collective's factor from
NVIDIA/nccl-tests doc/PERFORMANCE.md: all_reduce 2(n−1)/n, all_gather and reduce_scatter (n−1)/n, so
busbw is comparable across n and with the link's speed. GB/s here means 10^9 bytes per second, as there.
Every collective's result is checked once per size and placement before it is timed.

Rank and world come from the torchrun/Job environment: RANK (or, in an Indexed Job, JOB_COMPLETION_INDEX),
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.

Exit status: 0; 1 when ``--min-busbw-gbps`` is given and all_reduce's best busbw over the sizes is below
it, or ``--require-gdrdma`` is given and the NCCL log (``--nccl-log``) shows no GDRDMA channel;
2 on a wrong value (a failed correctness check included).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
#: float32, as nccl-tests' default ``-d float``.
ELEMENT_BYTES = 4
#: Prefix of the one-line JSON summary that ``gather_results.py`` looks for in a pod's log.
RESULT_MARK = "ALLREDUCE_RESULT "
#: NCCL prints ``... via NET/IB/0/GDRDMA`` for a channel whose NIC reads/writes GPU memory directly
#: (NCCL_DEBUG=INFO; NVIDIA NCCL troubleshooting guide, "GPU Direct RDMA").
GDRDMA = re.compile(r"via NET/\S*/GDRDMA")
#: The transport of each channel NCCL connects: ``via P2P/CUMEM``, ``via NET/IB/0/GDRDMA``, ``via NET/Socket/0``.
TRANSPORT = re.compile(r"Channel \d+/\d+ :.* via (\S+)")
_ENV_KEYS = ("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_")

ALL_REDUCE = "all_reduce"
ALL_GATHER = "all_gather"
REDUCE_SCATTER = "reduce_scatter"
OPS = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER)
BW_MODES = ("batch", "per-call")
RANK_TIMES = ("max", "avg")


# ----------------------------------------------------------------------------------------------
# Arithmetic (pure)


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (10^9 B/s): the array's size S over the collective's time."""
    if seconds <= 0:
        raise ValueError(f"time must be positive (got {seconds})")
    return nbytes / seconds / 1e9


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md, "Summary").

    all_reduce moves every element 2(n−1) times over n links; all_gather and reduce_scatter do one
    half of that (the assignments, or the additions), (n−1)/n.
    """
    if world < 1:
        raise ValueError(f"world size must be at least 1 (got {world})")
    if op == ALL_REDUCE:
        return 2 * (world - 1) / world
    if op in (ALL_GATHER, REDUCE_SCATTER):
        return (world - 1) / world
    raise ValueError(f"unknown collective {op!r} (known: {', '.join(OPS)})")


def busbw_factor(world: int) -> float:
    """all_reduce's factor 2(n−1)/n."""
    return bus_factor(ALL_REDUCE, world)


def busbw_gbps(nbytes: int, seconds: float, world: int, op: str = ALL_REDUCE) -> float:
    """Bus bandwidth in GB/s: algbw × the collective's factor."""
    return algbw_gbps(nbytes, seconds) * bus_factor(op, world)


@dataclass(frozen=True)
class CollSize:
    """Element counts of one collective call of nccl-tests size S (``getCollByteCount`` per test)."""

    op: str
    send_count: int
    recv_count: int

    @property
    def nbytes(self) -> int:
        """S as nccl-tests reports it: max(send, receive) bytes, the whole array."""
        return max(self.send_count, self.recv_count) * ELEMENT_BYTES


def coll_size(op: str, nbytes: int, world: int) -> CollSize:
    """Counts for size ``nbytes``: all_reduce S/S, all_gather S/n → S, reduce_scatter S → S/n.

    Like nccl-tests (src/all_gather.cu, src/reduce_scatter.cu ``GetCollByteCount``), the per-rank part
    is rounded down to whole elements, so S can come out a little below the size asked for.
    """
    count = nbytes // ELEMENT_BYTES
    if op == ALL_REDUCE:
        return CollSize(op, count, count)
    per_rank = count // world
    if per_rank < 1:
        raise ValueError(f"{op} of {nbytes} B over {world} ranks leaves no element per rank")
    if op == ALL_GATHER:
        return CollSize(op, per_rank, per_rank * world)
    if op == REDUCE_SCATTER:
        return CollSize(op, per_rank * world, per_rank)
    raise ValueError(f"unknown collective {op!r} (known: {', '.join(OPS)})")


def expected_chunks(op: str, world: int) -> list[float]:
    """What the correctness check expects when rank r fills its input with r + 1.

    One value per equal chunk of the output: a sum n(n+1)/2 everywhere for all_reduce and
    reduce_scatter, chunk j = j + 1 for all_gather.
    """
    total = world * (world + 1) / 2
    if op == ALL_GATHER:
        return [float(j + 1) for j in range(world)]
    if op in (ALL_REDUCE, REDUCE_SCATTER):
        return [total]
    raise ValueError(f"unknown collective {op!r} (known: {', '.join(OPS)})")


def in_place_supported(op: str) -> tuple[bool, ...]:
    """The placements timed, out-of-place first (nccl-tests' column order): all_reduce in-place only."""
    return (True,) if op == ALL_REDUCE else (False, True)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear between closest ranks (numpy's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100 (got {q})")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def powers_of_two(lo: int, hi: int) -> list[int]:
    """``lo, 2·lo, 4·lo … ≤ hi``; ``lo`` must be a power of two."""
    if lo < 1 or lo & (lo - 1):
        raise ValueError(f"sizes start at a power of two (got {lo})")
    if hi < lo:
        raise ValueError(f"largest size {hi} is below the smallest {lo}")
    out = []
    size = lo
    while size <= hi:
        out.append(size)
        size *= 2
    return out


_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """A byte count: ``4096``, ``16M``, ``1G``, ``256MiB`` (K/M/G are powers of 1024, as nccl-tests' -b/-e)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (a byte count, or a number with K, M or G)")
    return int(m.group(1)) * {"": 1, "K": KIB, "M": MIB, "G": GIB}[m.group(2).upper()]


def human_bytes(n: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class Placement:
    """One placement's (in- or out-of-place) time and bandwidths."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass(frozen=True)
class BandwidthRow:
    op: str
    #: nccl-tests' S (:attr:`CollSize.nbytes`).
    nbytes: int
    #: Calls per timed batch (batch mode) or timed calls (per-call mode).
    iters: int
    mode: str
    #: In-place: every collective has it; the headline columns.
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    #: Out-of-place; ``None`` for all_reduce (torch.distributed has none).
    oop: Placement | None = None


@dataclass(frozen=True)
class LatencyRow:
    nbytes: int
    iters: int
    p50_us: float
    p99_us: float
    mean_us: float


def placement(op: str, nbytes: int, seconds: float, world: int) -> Placement:
    return Placement(seconds * 1e6, algbw_gbps(nbytes, seconds), busbw_gbps(nbytes, seconds, world, op))


def bandwidth_row(
    op: str,
    nbytes: int,
    world: int,
    mode: str,
    iters: int,
    in_place_s: float,
    out_of_place_s: float | None = None,
) -> BandwidthRow:
    """One table row from the time of one call, in-place and (where there is one) out-of-place."""
    ip = placement(op, nbytes, in_place_s, world)
    oop = None if out_of_place_s is None else placement(op, nbytes, out_of_place_s, world)
    return BandwidthRow(op, nbytes, iters, mode, ip.time_us, ip.algbw_gbps, ip.busbw_gbps, oop)


def latency_row(nbytes: int, times_s: Sequence[float]) -> LatencyRow:
    return LatencyRow(
        nbytes=nbytes,
        iters=len(times_s),
        p50_us=percentile(times_s, 50) * 1e6,
        p99_us=percentile(times_s, 99) * 1e6,
        mean_us=sum(times_s) / len(times_s) * 1e6,
    )


def row_busbws(row: BandwidthRow) -> list[float]:
    return [row.busbw_gbps] + ([row.oop.busbw_gbps] if row.oop is not None else [])


def peak_busbw(rows: Sequence[BandwidthRow], op: str = ALL_REDUCE) -> float | None:
    """The best busbw of ``op`` over sizes and placements."""
    values = [b for r in rows if r.op == op for b in row_busbws(r)]
    return max(values) if values else None


def avg_busbw(rows: Sequence[BandwidthRow], op: str = ALL_REDUCE) -> float | None:
    """nccl-tests' closing ``# Avg bus bandwidth``: the mean over every size and placement printed."""
    values = [b for r in rows if r.op == op for b in row_busbws(r)]
    return sum(values) / len(values) if values else None


def gdrdma_in_log(text: str) -> bool:
    """Whether an NCCL_DEBUG=INFO log shows at least one channel using GPUDirect RDMA."""
    return GDRDMA.search(text) is not None


def nccl_transports(text: str) -> list[str]:
    """The distinct channel transports in an NCCL_DEBUG=INFO log, sorted."""
    return sorted({m.group(1) for m in TRANSPORT.finditer(text)})


def verdict(rows: Sequence[BandwidthRow], min_busbw_gbps: float | None) -> bool | None:
    """Pass when all_reduce's best busbw over all sizes reaches the threshold; ``None`` without one."""
    if min_busbw_gbps is None:
        return None
    peak = peak_busbw(rows)
    return peak is not None and peak >= min_busbw_gbps


# ----------------------------------------------------------------------------------------------
# Timing loops (pure: the clock, the events and the collectives are passed in)


class Event(Protocol):
    """What the batch loop needs of a device event: ``torch.cuda.Event(enable_timing=True)`` has it."""

    def record(self) -> None: ...
    def synchronize(self) -> None: ...
    def elapsed_time(self, end: Any) -> float: ...  # milliseconds, as torch.cuda.Event


class HostEvent:
    """An :class:`Event` on the host clock, for backends whose collectives return when they are done (gloo)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.at: float | None = None

    def record(self) -> None:
        self.at = self._clock()

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: HostEvent) -> float:
        if self.at is None or end.at is None:
            raise RuntimeError("elapsed_time of an event that was never recorded")
        return (end.at - self.at) * 1e3


def time_batch(launch: Callable[[], object], new_event: Callable[[], Event], iters: int) -> float:
    """Seconds per call: one event pair around ``iters`` back-to-back calls (nccl-tests ``BenchTime``).

    No synchronization and no host clock inside the batch: the calls queue on the device one after the
    other, as a training step issues them, and the launch cost of all but the first is hidden.
    """
    if iters < 1:
        raise ValueError(f"a batch needs at least one call (got {iters})")
    start, stop = new_event(), new_event()
    start.record()
    for _ in range(iters):
        launch()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / 1e3 / iters


def time_per_call(
    launch: Callable[[], object],
    sync: Callable[[], None],
    between: Callable[[], object],
    iters: int,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """Seconds of each of ``iters`` calls, each on the host between two device synchronizations.

    ``between`` runs outside the timed window (it rescales an in-place sum so that it stays finite).
    """
    times = []
    for _ in range(iters):
        sync()
        start = clock()
        launch()
        sync()
        times.append(clock() - start)
        between()
    return times


class Comm(Protocol):
    """The collectives, buffers and clocks of one rank. :class:`TorchComm` is the real one."""

    rank: int
    world: int

    def prepare(self, size: CollSize, in_place: bool) -> Callable[[], object]:
        """Buffers for one op/size/placement, filled with random data; returns the call to time."""
        ...

    def check(self, size: CollSize, in_place: bool) -> None:
        """Run once with rank r's input = r + 1 and compare with :func:`expected_chunks`; raise ArithmeticError."""
        ...

    def rescale(self) -> None:
        """Bring the last prepared in-place buffer back to its scale (per-call mode, outside the timing)."""
        ...

    def sync(self) -> None: ...
    def barrier(self) -> None: ...
    def new_event(self) -> Event: ...
    def reduce_times(self, values: list[float], how: str) -> list[float]:
        """Across ranks, element-wise: ``max`` or ``avg``."""
        ...


def measure_bandwidth(
    comm: Comm,
    ops: Sequence[str],
    sizes: Sequence[int],
    *,
    warmup: int,
    iters: int,
    mode: str,
    rank_time: str,
    clock: Callable[[], float] = time.perf_counter,
) -> list[BandwidthRow]:
    """Every op × size × placement, timed in ``mode``; one cross-rank reduction of all the times at the end.

    Per placement: the check, ``warmup`` untimed calls, a device sync and a barrier (every rank starts
    the timed calls together, as nccl-tests' ``Barrier`` before ``timer tim``), then the timing.
    """
    if mode not in BW_MODES:
        raise ValueError(f"unknown bandwidth mode {mode!r} (known: {', '.join(BW_MODES)})")
    plan: list[tuple[CollSize, bool]] = []
    local: list[float] = []
    for op in ops:
        for nbytes in sizes:
            size = coll_size(op, nbytes, comm.world)
            for in_place in in_place_supported(op):
                comm.check(size, in_place)
                launch = comm.prepare(size, in_place)
                for _ in range(warmup):
                    launch()
                comm.sync()
                comm.barrier()
                if mode == "batch":
                    local.append(time_batch(launch, comm.new_event, iters))
                else:
                    reps = time_per_call(launch, comm.sync, comm.rescale, iters, clock)
                    local.append(sum(reps) / len(reps))
                plan.append((size, in_place))
                del launch  # its buffers go before the next size's are made
    times = comm.reduce_times(local, rank_time)
    rows: list[BandwidthRow] = []
    by_key: dict[tuple[str, int], dict[bool, float]] = {}
    for (size, in_place), t in zip(plan, times, strict=True):
        by_key.setdefault((size.op, size.nbytes), {})[in_place] = t
    for (op, nbytes), t_by in by_key.items():
        rows.append(bandwidth_row(op, nbytes, comm.world, mode, iters, t_by[True], t_by.get(False)))
    return rows


def measure_latency(
    comm: Comm, sizes: Sequence[int], *, warmup: int, iters: int, clock: Callable[[], float] = time.perf_counter
) -> list[LatencyRow]:
    """all_reduce per call; a call's time is the slowest rank's (one MAX reduction per size)."""
    rows = []
    for nbytes in sizes:
        size = coll_size(ALL_REDUCE, nbytes, comm.world)
        comm.check(size, True)
        launch = comm.prepare(size, True)
        for _ in range(warmup):
            launch()
            comm.rescale()
        comm.sync()
        comm.barrier()
        reps = time_per_call(launch, comm.sync, comm.rescale, iters, clock)
        rows.append(latency_row(size.nbytes, comm.reduce_times(reps, "max")))
    return rows


# ----------------------------------------------------------------------------------------------
# Environment (pure)


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world: int
    local_rank: int
    master_addr: str
    master_port: int


def dist_env(environ: Mapping[str, str]) -> DistEnv:
    """Rank and rendezvous from torchrun's variables; an Indexed Job's JOB_COMPLETION_INDEX stands in for RANK."""
    rank_text = environ.get("RANK") or environ.get("JOB_COMPLETION_INDEX") or "0"
    world = int(environ.get("WORLD_SIZE") or "1")
    rank = int(rank_text)
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is outside world size {world}")
    return DistEnv(
        rank=rank,
        world=world,
        local_rank=int(environ.get("LOCAL_RANK") or "0"),
        master_addr=environ.get("MASTER_ADDR") or "127.0.0.1",
        master_port=int(environ.get("MASTER_PORT") or "29500"),
    )


def pick_backend(requested: str, cuda_available: bool) -> str:
    if requested == "auto":
        return "nccl" if cuda_available else "gloo"
    if requested == "nccl" and not cuda_available:
        raise ValueError("--backend nccl needs a CUDA device; use gloo on CPU")
    return requested


def pick_ops(requested: str | None, backend: str) -> list[str]:
    """The collectives to time: ``--ops`` as given, else all three under NCCL and all_reduce under gloo
    (gloo's reduce_scatter support differs between torch releases; CI only needs the arithmetic)."""
    if requested is None:
        return list(OPS) if backend == "nccl" else [ALL_REDUCE]
    ops = [x.strip() for x in requested.split(",") if x.strip()]
    unknown = [x for x in ops if x not in OPS]
    if unknown or not ops:
        raise ValueError(f"--ops {requested!r}: known collectives are {', '.join(OPS)}")
    return list(dict.fromkeys(ops))


# ----------------------------------------------------------------------------------------------
# Report (pure)


@dataclass
class Report:
    label: str
    backend: str
    world_size: int
    hostname: str
    device: str
    torch_version: str
    nccl_version: str | None
    bw_mode: str = "batch"
    rank_time: str = "max"
    bandwidth: list[BandwidthRow] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    #: all_reduce's best busbw (the judged number) and nccl-tests' average over the sweep.
    peak_busbw_gbps: float | None = None
    avg_busbw_gbps: float | None = None
    peak_busbw_by_op: dict[str, float] = field(default_factory=dict)
    min_busbw_gbps: float | None = None
    busbw_ok: bool | None = None
    gdrdma: bool | None = None
    transports: list[str] = field(default_factory=list)
    passed: bool = True
    env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """The one-line result a log scraper needs (no tables)."""
        keys = (
            "label",
            "backend",
            "world_size",
            "bw_mode",
            "rank_time",
            "peak_busbw_gbps",
            "avg_busbw_gbps",
            "peak_busbw_by_op",
            "min_busbw_gbps",
            "busbw_ok",
            "gdrdma",
            "transports",
            "passed",
        )
        out = {k: getattr(self, k) for k in keys}
        small = [r for r in self.latency if r.nbytes <= 8 * KIB]
        out["latency_nbytes"] = small[0].nbytes if small else None
        out["latency_p50_us"] = small[0].p50_us if small else None
        out["latency_p99_us"] = small[0].p99_us if small else None
        return out


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def format_tables(report: Report) -> str:
    head = (
        f"backend={report.backend} world={report.world_size} device={report.device} torch={report.torch_version} "
        f"nccl={report.nccl_version} bw-mode={report.bw_mode} rank-time={report.rank_time}"
    )
    lines = [f"#{' ' + report.label if report.label else ''} {head}"]
    for op in dict.fromkeys(r.op for r in report.bandwidth):
        lines.append(f"# {op}{'':>28}out-of-place{'':>25}in-place")
        lines.append(
            f"{'size':>10} {'iters':>6} {'time_us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11}"
            f" {'time_us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11}"
        )
        for b in (r for r in report.bandwidth if r.op == op):
            o = b.oop
            lines.append(
                f"{human_bytes(b.nbytes):>10} {b.iters:>6} {_num(o and o.time_us, '.1f'):>11} "
                f"{_num(o and o.algbw_gbps, '.2f'):>11} {_num(o and o.busbw_gbps, '.2f'):>11} "
                f"{b.time_us:>11.1f} {b.algbw_gbps:>11.2f} {b.busbw_gbps:>11.2f}"
            )
        lines.append(f"# {op} avg busbw {_num(avg_busbw(report.bandwidth, op), '.2f')} GB/s")
    if report.latency:
        lines.append("# all_reduce latency, per call")
        lines.append(f"{'size':>10} {'iters':>6} {'p50_us':>11} {'p99_us':>11} {'mean_us':>11}")
    for lat in report.latency:
        lines.append(
            f"{human_bytes(lat.nbytes):>10} {lat.iters:>6} {lat.p50_us:>11.1f} {lat.p99_us:>11.1f} {lat.mean_us:>11.1f}"
        )
    if report.peak_busbw_gbps is not None:
        lines.append(f"peak busbw {report.peak_busbw_gbps:.2f} GB/s")
    if report.min_busbw_gbps is not None:
        lines.append(f"threshold {report.min_busbw_gbps:.2f} GB/s: {'PASS' if report.busbw_ok else 'FAIL'}")
    if report.gdrdma is not None:
        lines.append(f"NCCL GDRDMA channels: {'yes' if report.gdrdma else 'no'}")
    if report.transports:
        lines.append(f"NCCL channel transports: {', '.join(report.transports)}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# torch (the only part that needs it)


class TorchComm:
    """:class:`Comm` over torch.distributed: NCCL on the GPU (device events) or gloo on the CPU (host clock)."""

    def __init__(self, torch: Any, dist: Any, device: Any, backend: str, rank: int, world: int) -> None:
        self.torch, self.dist, self.device, self.backend = torch, dist, device, backend
        self.rank, self.world = rank, world
        self._rescale: Callable[[], object] = lambda: None

    def _fill(self, count: int, value: float | None) -> Any:
        t = self.torch.empty(count, dtype=self.torch.float32, device=self.device)
        # Random, never zeros: zeros can run faster than real data (device README, METHOD.md).
        return t.uniform_() if value is None else t.fill_(value)

    def _buffers(self, size: CollSize, in_place: bool, value: float | None) -> tuple[Any, Any]:
        """(input, output); in place the input is the output (all_reduce), or the rank's slice of it
        (all_gather: sendbuff = recvbuff + rank·count; reduce_scatter: recvbuff = sendbuff + rank·count,
        as NCCL defines in-place for them)."""
        r = self.rank
        if size.op == ALL_REDUCE:
            x = self._fill(size.send_count, value)
            return x, x
        if size.op == ALL_GATHER:
            out = self._fill(size.recv_count, None if value is None else -1.0)
            inp = out.narrow(0, r * size.send_count, size.send_count) if in_place else None
            if inp is None:
                inp = self._fill(size.send_count, value)
            elif value is not None:
                inp.fill_(value)
            return inp, out
        inp = self._fill(size.send_count, value)
        if in_place:
            return inp, inp.narrow(0, r * size.recv_count, size.recv_count)
        return inp, self._fill(size.recv_count, None if value is None else -1.0)

    def _call(self, op: str, inp: Any, out: Any) -> Callable[[], object]:
        d = self.dist
        if op == ALL_REDUCE:
            return lambda: d.all_reduce(inp)
        if op == ALL_GATHER:
            return lambda: d.all_gather_into_tensor(out, inp)
        return lambda: d.reduce_scatter_tensor(out, inp)

    def prepare(self, size: CollSize, in_place: bool) -> Callable[[], object]:
        inp, out = self._buffers(size, in_place, None)
        if size.op == ALL_REDUCE:
            inv = 1.0 / self.world
            self._rescale = lambda: inp.mul_(inv)
        else:
            self._rescale = lambda: None
        return self._call(size.op, inp, out)

    def check(self, size: CollSize, in_place: bool) -> None:
        inp, out = self._buffers(size, in_place, float(self.rank + 1))
        self._call(size.op, inp, out)()
        self.sync()
        want = expected_chunks(size.op, self.world)
        chunks = out.view(len(want), -1) if len(want) > 1 else out.view(1, -1)
        for j, value in enumerate(want):
            if not bool(self.torch.all(chunks[j] == value)):
                place = "in place" if in_place else "out of place"
                raise ArithmeticError(
                    f"{size.op} of {size.nbytes} B {place} gave a wrong result (expected {value} in chunk {j})"
                )

    def rescale(self) -> None:
        self._rescale()

    def sync(self) -> None:
        if self.backend == "nccl":
            self.torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        # A tiny all_reduce waited for on the device and the host: every rank leaves it together.
        t = self.torch.zeros(1, device=self.device)
        self.dist.all_reduce(t)
        self.sync()

    def new_event(self) -> Event:
        if self.backend == "nccl":
            return self.torch.cuda.Event(enable_timing=True)  # type: ignore[no-any-return]
        return HostEvent()

    def reduce_times(self, values: list[float], how: str) -> list[float]:
        if not values:
            return []
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        if how == "max":
            self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        else:
            self.dist.all_reduce(t)
            t /= self.world
        return [float(x) for x in t.cpu().tolist()]


def measure(args: argparse.Namespace, env: DistEnv) -> Report:
    import torch
    import torch.distributed as dist

    backend = pick_backend(args.backend, torch.cuda.is_available())
    ops = pick_ops(args.ops, backend)
    if backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    os.environ.setdefault("MASTER_ADDR", env.master_addr)
    os.environ.setdefault("MASTER_PORT", str(env.master_port))
    dist.init_process_group(backend=backend, rank=env.rank, world_size=env.world)
    try:
        nccl_version = None
        if backend == "nccl":
            v = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
            nccl_version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        report = Report(
            label=args.label,
            backend=backend,
            world_size=env.world,
            hostname=socket.gethostname(),
            device=torch.cuda.get_device_name(device) if backend == "nccl" else "cpu",
            torch_version=torch.__version__,
            nccl_version=nccl_version,
            bw_mode=args.bw_mode,
            rank_time=args.rank_time,
            env={k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_KEYS)},
        )
        comm = TorchComm(torch, dist, device, backend, env.rank, env.world)
        report.bandwidth = measure_bandwidth(
            comm,
            ops,
            powers_of_two(args.min_bytes, args.max_bytes),
            warmup=args.warmup,
            iters=args.iters,
            mode=args.bw_mode,
            rank_time=args.rank_time,
        )
        if args.lat_iters > 0:
            report.latency = measure_latency(
                comm, powers_of_two(args.lat_min_bytes, args.lat_max_bytes), warmup=args.warmup, iters=args.lat_iters
            )
        comm.sync()
    finally:
        dist.destroy_process_group()
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--ops", help=f"comma-separated collectives ({', '.join(OPS)}); default all under NCCL")
    p.add_argument("--bw-mode", choices=BW_MODES, default="batch", help="bandwidth timing (default: batch)")
    p.add_argument("--rank-time", choices=RANK_TIMES, default="max", help="a time across ranks: slowest or mean")
    p.add_argument("--min-bytes", type=parse_size, default=1 * MIB)
    p.add_argument("--max-bytes", type=parse_size, default=1 * GIB)
    p.add_argument("--iters", type=int, default=20, help="calls per timed batch (or timed calls) per size")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls before each size")
    p.add_argument("--lat-min-bytes", type=parse_size, default=8)
    p.add_argument("--lat-max-bytes", type=parse_size, default=16 * KIB)
    p.add_argument("--lat-iters", type=int, default=100, help="timed calls per latency size (0: skip)")
    p.add_argument("--json", metavar="PATH", help="write the full report as JSON (rank 0)")
    p.add_argument("--label", default="", help="name of this run in the tables and the result line")
    p.add_argument("--min-busbw-gbps", type=float, help="fail (exit 1) when all_reduce's best busbw is below this")
    p.add_argument("--nccl-log", metavar="GLOB", help="NCCL_DEBUG=INFO log file(s) to search for GDRDMA")
    p.add_argument("--require-gdrdma", action="store_true", help="fail (exit 1) unless the NCCL log shows GDRDMA")
    args = p.parse_args(argv)
    if args.iters < 1:
        p.error("--iters must be at least 1")
    if args.warmup < 0:
        p.error("--warmup must be at least 0")
    if args.require_gdrdma and not args.nccl_log:
        p.error("--require-gdrdma needs --nccl-log")
    return args


def finish(report: Report, args: argparse.Namespace, log_texts: Sequence[str] | None) -> Report:
    """Fill in the verdicts (pure apart from its argument)."""
    report.peak_busbw_gbps = peak_busbw(report.bandwidth)
    report.avg_busbw_gbps = avg_busbw(report.bandwidth)
    peaks = {op: peak_busbw(report.bandwidth, op) for op in dict.fromkeys(r.op for r in report.bandwidth)}
    report.peak_busbw_by_op = {op: peak for op, peak in peaks.items() if peak is not None}
    report.min_busbw_gbps = args.min_busbw_gbps
    report.busbw_ok = verdict(report.bandwidth, args.min_busbw_gbps)
    report.gdrdma = None if log_texts is None else any(gdrdma_in_log(t) for t in log_texts)
    report.transports = nccl_transports("\n".join(log_texts or ()))
    report.passed = report.busbw_ok is not False and not (args.require_gdrdma and not report.gdrdma)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = dist_env(os.environ)
    try:
        report = measure(args, env)
    except (ArithmeticError, ValueError) as err:
        print(f"allreduce_bench: {err}", file=sys.stderr)
        return 2
    texts = None
    if args.nccl_log:
        sys.stderr.flush()
        texts = [Path(path).read_text(errors="replace") for path in sorted(glob.glob(args.nccl_log))]
    finish(report, args, texts)
    if env.rank == 0:
        print(format_tables(report), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(report.to_json(), fh, indent=2)
    print(RESULT_MARK + json.dumps({**report.summary(), "rank": env.rank}), flush=True)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
