"""Scale benchmark of the offline plan: synthetic fleets, one subprocess per case.

Reports wall and CPU time, peak RSS, Pulumi resources, partitions.conf size and partitions for
fleets of 10/100/1000/4000 nodes x 8 HCAs x 6 VFs with 8/64/256/1024 teams. Targets (issue 7):
resources grow with nodes, teams and node groups, never with nodes x HCAs x VFs; 1000 nodes / 256
teams under 10 s and 1 GB on 2 cores; (issue 13) 4000 nodes / 1024 teams under 20 s and 1 GB. CPU
time is the figure to compare on a shared machine: wall time also counts other processes' turns.
Every Kubernetes object of every case is checked against the API server's size limits
(:mod:`components.plan.api_limits`: 1 MiB of ConfigMap/Secret data, 256 KiB of annotations, 1.5 MiB per
object); the benchmark exits 1 when one would be refused. Not a test: run it with ``make bench``
(or ``python benchmarks/plan_scale.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: (nodes, teams, VFs per HCA): issue 7's three fleets, the 1000-node one again with 16 VFs, and
#: issue 13's 4000 nodes / 1024 teams (target: plan under 20 s and 1 GB on 2 cores).
CASES = [(10, 8, 6), (100, 64, 6), (1000, 256, 6), (1000, 256, 16), (4000, 1024, 6)]
#: The target machine of issue 7: the plan runs pinned to this many cores (where the OS allows).
CORES = 2
HCAS, GROUPS = 8, 4
#: Teams with a partition (each needs its own VF index, so at most the VFs per HCA).
PARTITIONED = 6


def synthetic_config(nodes: int, teams: int, vfs: int = 6) -> dict[str, Any]:
    """A fleet of ``nodes`` 8-GPU nodes in 4 groups, ``vfs`` VFs per HCA; the first 6 teams get partitions."""
    hcas = [f"mlx5_{h}" for h in range(HCAS)]
    groups = [
        {"name": "mig", "gpuModel": "H100-80GB", "hcas": hcas, "mig": {"layout": "1x4g.40gb-3x1g.10gb"}},
        {"name": "shared", "gpuModel": "H100-80GB", "hcas": hcas, "timeSlicing": {"replicas": 4}},
        {"name": "full-a", "gpuModel": "H100-80GB", "hcas": hcas},
        {"name": "full-b", "gpuModel": "H100-80GB", "hcas": hcas},
    ]
    team_list: list[dict[str, Any]] = []
    for t in range(teams):
        team: dict[str, Any] = {
            "name": f"team-{t:03d}",
            "groups": [f"oidc:team-{t:03d}"],
            "quota": {"gpus": 8, "timeSlicedGpus": 4, "mig": {"1g.10gb": 3}, "rdma": 8},
        }
        if t < PARTITIONED:
            team["partition"] = {"pkey": t + 1, "vfIndex": t}
            team["verify"] = t == 0
        else:
            team["quota"]["rdma"] = 0
        team_list.append(team)
    return {
        "gpuaas:platform": {
            "kind": "onprem",
            "kubernetesVersion": "1.37.2",
            "nodeGroups": groups,
            "nodes": [
                {"name": f"node-{i:04d}", "id": i + 1, "nodeGroup": groups[i % GROUPS]["name"]} for i in range(nodes)
            ],
            "fabric": {"vfsPerHca": vfs, "firmwareMaxVfs": max(vfs, 16)},
            "multus": {"clusterNetwork": "k8s-pod-network"},
        },
        "gpuaas:teams": team_list,
        "gpuaas:quotaPolicy": {"allowOversubscription": True},
    }


def one_case(nodes: int, teams: int, vfs: int) -> dict[str, Any]:
    """Run in a child process: the plan of one synthetic fleet, measured."""
    sys.path.insert(0, str(ROOT))
    from components.loader import gpuaas_section, parse_config
    from components.plan.api_limits import size_problems
    from components.plan.offline import gc_paused, run_program
    from components.plan.writer import plan_files

    config = synthetic_config(nodes, teams, vfs)
    start, cpu_start = time.perf_counter(), time.process_time()
    parse_config(gpuaas_section(config))
    with gc_paused():  # as components.plan.writer.write_plan does
        run = run_program("bench", config=config)
        files = plan_files(run)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    conf = str(run.outputs.get("partitionsConf") or "")
    oversized = [
        f"{r.name}: {problem}"
        for r in run.records
        if r.custom and r.type.startswith("kubernetes:") and "kind" in r.inputs
        for problem in size_problems(r.inputs)
    ]
    return {
        "oversized": oversized,
        "largest_object_bytes": max(
            (len(json.dumps(r.inputs, separators=(",", ":"), default=str)) for r in run.records if r.custom),
            default=0,
        ),
        "nodes": nodes,
        "hcas": HCAS,
        "vfs": vfs,
        "teams": teams,
        "resources": sum(1 for r in run.records if r.custom),
        "guid_config_maps": sum(1 for r in run.records if r.name.startswith("gpuaas-sriov-host-gpuaas-vf-guids-")),
        "components": sum(1 for r in run.records if not r.custom),
        "partitions": len(
            {ln.split("=", 1)[0] for ln in conf.splitlines() if ln and not ln.startswith(("#", "Default"))}
        ),
        "partitions_conf_bytes": len(conf.encode()),
        "plan_files": len(files),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs=3, type=int, metavar=("NODES", "TEAMS", "VFS"))
    parser.add_argument("--json", type=Path, default=ROOT / "bench-out" / "plan_scale.json")
    parser.add_argument("--cores", type=int, default=CORES, help="pin each case to this many CPUs (default 2)")
    args = parser.parse_args()
    if args.case:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cores])
        print(json.dumps(one_case(*args.case)))
        return 0
    rows = []
    for nodes, teams, vfs in CASES:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--case", str(nodes), str(teams), str(vfs), "--cores", str(args.cores)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        process_s = round(time.perf_counter() - start, 2)
        if proc.returncode != 0:
            reason = (proc.stderr.strip().splitlines() or ["failed"])[-1]
            print(f"{nodes:>6} {teams:>6} {vfs:>4}  refused: {reason}")
            continue
        rows.append({**json.loads(proc.stdout.strip().splitlines()[-1]), "process_s": process_s})
    head = (
        f"{'nodes':>6} {'teams':>6} {'vfs':>4} {'resources':>10} {'guid cms':>8} {'partitions':>10} {'conf KiB':>9} "
        f"{'plan s':>7} {'cpu s':>6} {'process s':>9} {'peak MB':>8}"
    )
    print(
        f"each case pinned to {args.cores} CPUs; plan s: config to plan files (wall; cpu s: its CPU time), "
        "process s: with start-up"
    )
    print(head)
    for r in rows:  # refused cases were printed above
        print(
            f"{r['nodes']:>6} {r['teams']:>6} {r['vfs']:>4} {r['resources']:>10} {r['guid_config_maps']:>8} "
            f"{r['partitions']:>10} "
            f"{r['partitions_conf_bytes'] / 1024:>9.1f} {r['wall_s']:>7} {r['cpu_s']:>6} {r['process_s']:>9} "
            f"{r['peak_rss_mb']:>8}"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2) + "\n")
    refused = [(r["nodes"], r["teams"], r["vfs"], p) for r in rows for p in r["oversized"]]
    for nodes, teams, vfs, problem in refused:
        print(f"{nodes:>6} {teams:>6} {vfs:>4}  the API server would refuse {problem}")
    print(f"largest object: {max((r['largest_object_bytes'] for r in rows), default=0)} bytes of JSON")
    return 1 if refused or len(rows) < len(CASES) else 0


if __name__ == "__main__":
    raise SystemExit(main())
