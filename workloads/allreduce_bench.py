#!/usr/bin/env python3
"""all_reduce bus bandwidth and latency over torch.distributed, measured the way nccl-tests does.

Standalone on purpose (standard library + torch): gpuaas mounts this file into the NCCL
verification pods from a ConfigMap, and CI runs it on CPU with gloo.

* bandwidth: float32 tensors of ``--min-bytes``..``--max-bytes`` (powers of two; defaults 1 MiB..256 MiB),
  ``--iters`` timed repetitions each (default 20) after ``--warmup`` untimed ones;
* latency: ``--lat-min-bytes``..``--lat-max-bytes`` (defaults 8 B..16 KiB), ``--lat-iters`` repetitions
  (default 100), p50 and p99.

Every repetition is timed on the host around the one ``all_reduce`` call, with the device synchronized
before and after it (``torch.cuda.synchronize`` under NCCL; gloo on CPU returns when the data is there).
A repetition's time is the slowest rank's (a MAX all_reduce of the per-rank times): the collective is
done when every rank has its result.

algbw = bytes / time; busbw = algbw × 2(n−1)/n — the all_reduce factor of nccl-tests
(NVIDIA/nccl-tests doc/PERFORMANCE.md), so busbw is comparable across n and with the link's speed.
GB/s here means 10^9 bytes per second, as in nccl-tests.

Rank and world come from the torchrun/Job environment: RANK (or, in an Indexed Job, JOB_COMPLETION_INDEX),
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.

Exit status: 0; 1 when ``--min-busbw-gbps`` is given and the best busbw over the bandwidth sizes is below
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
from typing import Any

KIB = 1 << 10
MIB = 1 << 20
#: Prefix of the one-line JSON summary that ``gather_results.py`` looks for in a pod's log.
RESULT_MARK = "ALLREDUCE_RESULT "
#: NCCL prints ``... via NET/IB/0/GDRDMA`` for a channel whose NIC reads/writes GPU memory directly
#: (NCCL_DEBUG=INFO; NVIDIA NCCL troubleshooting guide, "GPU Direct RDMA").
GDRDMA = re.compile(r"via NET/\S*/GDRDMA")
#: The transport of each channel NCCL connects: ``via P2P/CUMEM``, ``via NET/IB/0/GDRDMA``, ``via NET/Socket/0``.
TRANSPORT = re.compile(r"Channel \d+/\d+ :.* via (\S+)")
_ENV_KEYS = ("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_")


# ----------------------------------------------------------------------------------------------
# Arithmetic (pure)


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (10^9 B/s): the tensor's size over the collective's time."""
    if seconds <= 0:
        raise ValueError(f"time must be positive (got {seconds})")
    return nbytes / seconds / 1e9


def busbw_factor(world: int) -> float:
    """nccl-tests' all_reduce factor 2(n−1)/n: the share of the data each rank must send and receive."""
    if world < 1:
        raise ValueError(f"world size must be at least 1 (got {world})")
    return 2 * (world - 1) / world


def busbw_gbps(nbytes: int, seconds: float, world: int) -> float:
    """Bus bandwidth in GB/s: algbw × 2(n−1)/n."""
    return algbw_gbps(nbytes, seconds) * busbw_factor(world)


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


def human_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class BandwidthRow:
    nbytes: int
    iters: int
    time_us_mean: float
    time_us_min: float
    algbw_gbps: float
    busbw_gbps: float
    #: From the fastest repetition.
    busbw_gbps_best: float


@dataclass(frozen=True)
class LatencyRow:
    nbytes: int
    iters: int
    p50_us: float
    p99_us: float
    mean_us: float


def bandwidth_row(nbytes: int, times_s: Sequence[float], world: int) -> BandwidthRow:
    """One table row from a size's timed repetitions; the headline busbw uses the mean time (as nccl-tests)."""
    mean = sum(times_s) / len(times_s)
    best = min(times_s)
    return BandwidthRow(
        nbytes=nbytes,
        iters=len(times_s),
        time_us_mean=mean * 1e6,
        time_us_min=best * 1e6,
        algbw_gbps=algbw_gbps(nbytes, mean),
        busbw_gbps=busbw_gbps(nbytes, mean, world),
        busbw_gbps_best=busbw_gbps(nbytes, best, world),
    )


def latency_row(nbytes: int, times_s: Sequence[float]) -> LatencyRow:
    return LatencyRow(
        nbytes=nbytes,
        iters=len(times_s),
        p50_us=percentile(times_s, 50) * 1e6,
        p99_us=percentile(times_s, 99) * 1e6,
        mean_us=sum(times_s) / len(times_s) * 1e6,
    )


def gdrdma_in_log(text: str) -> bool:
    """Whether an NCCL_DEBUG=INFO log shows at least one channel using GPUDirect RDMA."""
    return GDRDMA.search(text) is not None


def nccl_transports(text: str) -> list[str]:
    """The distinct channel transports in an NCCL_DEBUG=INFO log, sorted."""
    return sorted({m.group(1) for m in TRANSPORT.finditer(text)})


def verdict(rows: Sequence[BandwidthRow], min_busbw_gbps: float | None) -> bool | None:
    """Pass when the best mean-time busbw over all sizes reaches the threshold; ``None`` without one."""
    if min_busbw_gbps is None:
        return None
    return bool(rows) and max(r.busbw_gbps for r in rows) >= min_busbw_gbps


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
    bandwidth: list[BandwidthRow] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    peak_busbw_gbps: float | None = None
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
            "peak_busbw_gbps",
            "min_busbw_gbps",
            "busbw_ok",
            "gdrdma",
            "transports",
            "passed",
        )
        return {k: getattr(self, k) for k in keys}


def format_tables(report: Report) -> str:
    lines = [
        f"# all_reduce{' ' + report.label if report.label else ''} backend={report.backend} world={report.world_size} "
        f"device={report.device} torch={report.torch_version} nccl={report.nccl_version}",
        f"{'size':>10} {'iters':>6} {'time_us':>11} {'best_us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11} "
        f"{'best busbw':>11}",
    ]
    for b in report.bandwidth:
        lines.append(
            f"{human_bytes(b.nbytes):>10} {b.iters:>6} {b.time_us_mean:>11.1f} {b.time_us_min:>11.1f} "
            f"{b.algbw_gbps:>11.2f} {b.busbw_gbps:>11.2f} {b.busbw_gbps_best:>11.2f}"
        )
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
# Measurement (needs torch)


def _time_reps(
    run: Callable[[], object], sync: Callable[[], None], rescale: Callable[[], object], warmup: int, iters: int
) -> list[float]:
    for _ in range(warmup):
        run()
        rescale()
    sync()
    times = []
    for _ in range(iters):
        sync()
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
        rescale()  # outside the timed window: keeps repeated sums finite
    return times


def measure(args: argparse.Namespace, env: DistEnv) -> Report:
    import torch
    import torch.distributed as dist

    backend = pick_backend(args.backend, torch.cuda.is_available())
    if backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)

        def sync() -> None:
            torch.cuda.synchronize(device)
    else:
        device = torch.device("cpu")

        def sync() -> None:
            return None

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
            env={k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_KEYS)},
        )

        def slowest(times: list[float]) -> list[float]:
            t = torch.tensor(times, dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return [float(x) for x in t.cpu().tolist()]

        def series(nbytes: int, warmup: int, iters: int) -> list[float]:
            count = max(1, nbytes // 4)
            x = torch.full((count,), float(env.rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(x)
            sync()
            want = env.world * (env.world + 1) / 2
            if not torch.all(x == want):
                raise ArithmeticError(f"all_reduce of {nbytes} B gave a wrong sum (expected {want} everywhere)")
            x.uniform_()
            inv = 1.0 / env.world
            return slowest(_time_reps(lambda: dist.all_reduce(x), sync, lambda: x.mul_(inv), warmup, iters))

        for nbytes in powers_of_two(args.min_bytes, args.max_bytes):
            report.bandwidth.append(bandwidth_row(nbytes, series(nbytes, args.warmup, args.iters), env.world))
        if args.lat_iters > 0:
            for nbytes in powers_of_two(args.lat_min_bytes, args.lat_max_bytes):
                report.latency.append(latency_row(nbytes, series(nbytes, args.warmup, args.lat_iters)))
        sync()
    finally:
        dist.destroy_process_group()
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--min-bytes", type=int, default=1 * MIB)
    p.add_argument("--max-bytes", type=int, default=256 * MIB)
    p.add_argument("--iters", type=int, default=20, help="timed repetitions per bandwidth size")
    p.add_argument("--warmup", type=int, default=5, help="untimed repetitions before each size")
    p.add_argument("--lat-min-bytes", type=int, default=8)
    p.add_argument("--lat-max-bytes", type=int, default=16 * KIB)
    p.add_argument("--lat-iters", type=int, default=100, help="timed repetitions per latency size (0: skip)")
    p.add_argument("--json", metavar="PATH", help="write the full report as JSON (rank 0)")
    p.add_argument("--label", default="", help="name of this run in the tables and the result line")
    p.add_argument("--min-busbw-gbps", type=float, help="fail (exit 1) when the best busbw is below this")
    p.add_argument("--nccl-log", metavar="GLOB", help="NCCL_DEBUG=INFO log file(s) to search for GDRDMA")
    p.add_argument("--require-gdrdma", action="store_true", help="fail (exit 1) unless the NCCL log shows GDRDMA")
    args = p.parse_args(argv)
    if args.iters < 1:
        p.error("--iters must be at least 1")
    if args.require_gdrdma and not args.nccl_log:
        p.error("--require-gdrdma needs --nccl-log")
    return args


def finish(report: Report, args: argparse.Namespace, log_texts: Sequence[str] | None) -> Report:
    """Fill in the verdicts (pure apart from its argument)."""
    report.peak_busbw_gbps = max((r.busbw_gbps for r in report.bandwidth), default=None)
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
