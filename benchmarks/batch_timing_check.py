#!/usr/bin/env python3
"""Is the batch timing of ``workloads/allreduce_bench.py`` right, and what does per-call timing add?

Needs one GPU and torch; run it under ``torchrun --nproc_per_node=1`` (a one-rank NCCL group). With one
rank an out-of-place all_gather or reduce_scatter is a device-to-device copy of S bytes, so its batch
time must match a plain ``copy_`` of S bytes timed the same way; and the same batch timed on the host
(synchronize, host clock, the calls, synchronize) must agree with the events. In-place all_reduce of one
rank moves nothing, so its time per call is the launch cost: the floor under both methods.

Prints one table and writes it as JSON to ``--json``. BENCHMARKS.md records a run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("allreduce_bench", ROOT / "workloads" / "allreduce_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["allreduce_bench"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--json")
    args = p.parse_args()

    import torch
    import torch.distributed as dist

    b = _bench()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl")
    comm = b.TorchComm(torch, dist, device, "nccl", dist.get_rank(), dist.get_world_size())

    def sync() -> None:
        torch.cuda.synchronize(device)

    def new_event() -> Any:
        return torch.cuda.Event(enable_timing=True)

    def host_batch(launch: Any) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            launch()
        sync()
        return (time.perf_counter() - t0) / args.iters

    def warm(launch: Any) -> None:
        for _ in range(args.warmup):
            launch()
        sync()

    rows = []
    for nbytes in b.powers_of_two(1 << 10, args.max_bytes):
        src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
        dst = torch.empty_like(src)

        def copy(d: Any = dst, s: Any = src) -> Any:
            return d.copy_(s)

        warm(copy)
        copy_s = b.time_batch(copy, new_event, args.iters)
        row: dict[str, Any] = {"nbytes": nbytes, "copy_batch_us": copy_s * 1e6}
        for op in ("all_gather", "reduce_scatter"):
            size = b.coll_size(op, nbytes, comm.world)
            comm.check(size, False)
            launch = comm.prepare(size, False)
            warm(launch)
            row[f"{op}_batch_us"] = b.time_batch(launch, new_event, args.iters) * 1e6
            row[f"{op}_hostbatch_us"] = host_batch(launch) * 1e6
            reps = b.time_per_call(launch, sync, lambda: None, args.iters)
            row[f"{op}_percall_us"] = sum(reps) / len(reps) * 1e6
            del launch
        size = b.coll_size("all_reduce", nbytes, comm.world)
        launch = comm.prepare(size, True)
        warm(launch)
        row["all_reduce_ip_batch_us"] = b.time_batch(launch, new_event, args.iters) * 1e6
        reps = b.time_per_call(launch, sync, lambda: None, args.iters)
        row["all_reduce_ip_percall_us"] = sum(reps) / len(reps) * 1e6
        del launch, src, dst
        rows.append(row)

    cols = [
        "copy_batch_us",
        "all_gather_batch_us",
        "all_gather_hostbatch_us",
        "all_gather_percall_us",
        "reduce_scatter_batch_us",
        "all_reduce_ip_batch_us",
        "all_reduce_ip_percall_us",
    ]
    print(f"# torch {torch.__version__} nccl {torch.cuda.nccl.version()} {torch.cuda.get_device_name(device)}")
    print(f"{'size':>10} " + " ".join(f"{c.removesuffix('_us'):>24}" for c in cols) + f" {'ag/copy':>8}")
    for r in rows:
        ratio = r["all_gather_batch_us"] / r["copy_batch_us"]
        print(f"{b.human_bytes(r['nbytes']):>10} " + " ".join(f"{r[c]:>24.2f}" for c in cols) + f" {ratio:>8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
