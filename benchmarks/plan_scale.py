"""Scale benchmark of the offline plan: synthetic fleets, one subprocess per case.

Reports wall and CPU time, peak RSS, Pulumi resources, partitions.conf size and partitions for
fleets of 10/100/1000/4000 nodes x 8 HCAs x 6 VFs with 8/64/256/1024 teams. Targets (issue 7):
resources grow with nodes, teams and node groups, never with nodes x HCAs x VFs; 1000 nodes / 256
teams under 10 s and 1 GB on 2 cores; (issue 13) 4000 nodes / 1024 teams under 20 s and 1 GB. With
elastic quotas on (Kueue; issue 21, item 14): 4000 nodes with 512 and 1024 teams, so that doubling
the teams shows at most double the time, and the CPU time per planned resource within 1.2x of the
same fleet with elastic quotas off (elastic adds a ClusterQueue and a LocalQueue per team). CPU
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
#: (nodes, teams, VFs per HCA, elastic quotas): issue 7's three fleets, the 1000-node one again with
#: 16 VFs, issue 13's 4000 nodes / 1024 teams (target: plan under 20 s and 1 GB on 2 cores), and the
#: 4000-node fleet with 512 and 1024 teams, elastic quotas off and on (issue 21, item 14).
CASES = [
    (10, 8, 6, False),
    (100, 64, 6, False),
    (1000, 256, 6, False),
    (1000, 256, 16, False),
    (4000, 512, 6, False),
    (4000, 1024, 6, False),
    (4000, 512, 6, True),
    (4000, 1024, 6, True),
]
#: The target machine of issue 7: the plan runs pinned to this many cores (where the OS allows).
CORES = 2
HCAS, GROUPS = 8, 4
#: Teams with a partition (each needs its own VF index, so at most the VFs per HCA).
PARTITIONED = 6


def synthetic_config(nodes: int, teams: int, vfs: int = 6, elastic: bool = False) -> dict[str, Any]:
    """A fleet of ``nodes`` 8-GPU nodes in 4 groups, ``vfs`` VFs per HCA; the first 6 teams get partitions.

    ``elastic``: Kueue queues on. Guaranteed quotas must then fit each group (no oversubscription),
    so each team is guaranteed 4 whole GPUs, 4 time-sliced and 3 MIG 1g.10gb (1024 teams: 4096 of
    full-a's 8000 GPUs), and may borrow 4 GPUs more.
    """
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
    if elastic:
        for team in team_list:
            team["quota"].update(gpus=4, timeSlicedGpus=4, mig={"1g.10gb": 3})
            team["queue"] = {"borrowingLimit": {"gpus": 4}}
    return {
        **({"gpuaas:queues": {"elastic": True}} if elastic else {}),
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
        "gpuaas:quotaPolicy": {"allowOversubscription": not elastic},
    }


def one_case(nodes: int, teams: int, vfs: int, elastic: bool = False, write: Path | None = None) -> dict[str, Any]:
    """Run in a child process: the plan of one synthetic fleet, measured.

    ``write``: after measuring, write the plan files and summary there (to compare two versions'
    plans byte for byte with ``diff -r``).
    """
    sys.path.insert(0, str(ROOT))
    from components.loader import gpuaas_section, parse_config
    from components.plan.api_limits import object_size_issues, size_problems
    from components.plan.index import resource_counts
    from components.plan.offline import gc_paused, run_program
    from components.plan.summary import render_summary
    from components.plan.writer import manifest, plan_files, write_tree

    config = synthetic_config(nodes, teams, vfs, elastic)
    start, cpu_start = time.perf_counter(), time.process_time()
    cfg = parse_config(gpuaas_section(config))
    validation_cpu = time.process_time() - cpu_start
    # What components.plan.writer.write_plan does, less the disk: the summary too (issue 21, item
    # 14: its elastic-quota table was what grew with teams squared) and the object-size check.
    with gc_paused():
        run = run_program("bench", config=config)
        dump_start = time.process_time()
        files = plan_files(run)
        dump_cpu = time.process_time() - dump_start
        object_size_issues([manifest(r) for r in run.records if r.custom and "kind" in r.inputs], config)
        summary = render_summary(cfg, run, resource_counts(run), files)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if write is not None:
        write_tree(write, {**files, "summary.txt": summary})
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
        "elastic": elastic,
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
        # Issue 37's floor, a lower bound of it: validating the config and writing the same objects with
        # the plan writer's own dumper, without the SDK (the renderers' own cost not counted, so the
        # ratio cpu_s / floor_cpu_s is an upper bound of the plan's cost over its floor).
        "floor_cpu_s": round(validation_cpu + dump_cpu, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


#: Issue 37: validation linear in nodes and teams. (nodes, teams), each doubling the last.
VALIDATION_CASES = [(1000, 256), (2000, 512), (4000, 1024), (8000, 2048), (16000, 4096)]


def validation_rows(cases: list[tuple[int, int]] = VALIDATION_CASES, repeats: int = 3) -> list[dict[str, Any]]:
    """CPU time of validating each synthetic fleet (elastic on) from scratch: the median of ``repeats``.

    Validation is the one step of a plan that is not per resource: a rule comparing every node with
    every other (a ``list.count`` per node was, until issue 37) grows with the square of the fleet.
    """
    sys.path.insert(0, str(ROOT))
    from components import loader

    rows = []
    for nodes, teams in cases:
        config = synthetic_config(nodes, teams, 6, True)
        times = []
        for _ in range(repeats):
            loader._VALIDATED.clear()  # from scratch: the memo would answer a repeat at once
            cpu = time.process_time()
            loader.parse_stack(config, plan=True)
            times.append(time.process_time() - cpu)
        rows.append({"nodes": nodes, "teams": teams, "cpu_s": round(sorted(times)[len(times) // 2], 3)})
    return rows


def validation_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per fleet: its validation CPU, and the factor over the fleet half its size (target: at most x2)."""
    lines = []
    for half, r in zip([None, *rows], rows, strict=False):
        step = f", x{r['cpu_s'] / half['cpu_s']:.2f} of {half['nodes']}/{half['teams']}" if half else ""
        lines.append(f"validation {r['nodes']:>6} nodes / {r['teams']:>5} teams: {r['cpu_s']:.3f} s CPU{step}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs=4, type=int, metavar=("NODES", "TEAMS", "VFS", "ELASTIC"))
    parser.add_argument("--json", type=Path, default=ROOT / "bench-out" / "plan_scale.json")
    parser.add_argument("--cores", type=int, default=CORES, help="pin each case to this many CPUs (default 2)")
    parser.add_argument("--write", type=Path, help="with --case: write its plan files here after measuring")
    parser.add_argument(
        "--validation", action="store_true", help="only validation's CPU time, 1000/256 to 16000/4096 (issue 37)"
    )
    args = parser.parse_args()
    if args.validation:
        for line in validation_lines(validation_rows()):
            print(line)
        return 0
    if args.case:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cores])
        nodes, teams, vfs, elastic = args.case
        print(json.dumps(one_case(nodes, teams, vfs, bool(elastic), args.write)))
        return 0
    rows = []
    for nodes, teams, vfs, elastic in CASES:
        start = time.perf_counter()
        case = [str(nodes), str(teams), str(vfs), str(int(elastic))]
        proc = subprocess.run(
            [sys.executable, __file__, "--case", *case, "--cores", str(args.cores)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        process_s = round(time.perf_counter() - start, 2)
        if proc.returncode != 0:
            reason = (proc.stderr.strip().splitlines() or ["failed"])[-1]
            print(f"{nodes:>6} {teams:>6} {vfs:>4} {'on' if elastic else 'off':>7}  refused: {reason}")
            continue
        rows.append({**json.loads(proc.stdout.strip().splitlines()[-1]), "process_s": process_s})
    head = (
        f"{'nodes':>6} {'teams':>6} {'vfs':>4} {'elastic':>7} {'resources':>10} {'guid cms':>8} "
        f"{'partitions':>10} {'conf KiB':>9} "
        f"{'plan s':>7} {'cpu s':>6} {'process s':>9} {'peak MB':>8}"
    )
    print(
        f"each case pinned to {args.cores} CPUs; plan s: config to plan files (wall; cpu s: its CPU time), "
        "process s: with start-up"
    )
    print(head)
    for r in rows:  # refused cases were printed above
        print(
            f"{r['nodes']:>6} {r['teams']:>6} {r['vfs']:>4} {'on' if r['elastic'] else 'off':>7} "
            f"{r['resources']:>10} {r['guid_config_maps']:>8} "
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
    for line in scaling_lines(rows):
        print(line)
    return 1 if refused or len(rows) < len(CASES) else 0


def scaling_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 21, item 14: per fleet, CPU time per doubling of the teams, and elastic's cost per resource."""
    by = {(r["nodes"], r["teams"], r["vfs"], r["elastic"]): r for r in rows}
    lines = []
    for (nodes, teams, vfs, elastic), r in sorted(by.items()):
        half = by.get((nodes, teams // 2, vfs, elastic))
        if half is not None:
            lines.append(
                f"{nodes} nodes, elastic {'on' if elastic else 'off'}: {teams // 2} -> {teams} teams takes "
                f"x{r['cpu_s'] / half['cpu_s']:.2f} CPU time (target: at most x2)"
            )
        off = by.get((nodes, teams, vfs, False))
        if elastic and off is not None:
            ratio = (r["cpu_s"] / r["resources"]) / (off["cpu_s"] / off["resources"])
            lines.append(
                f"{nodes} nodes, {teams} teams: CPU per resource with elastic on is x{ratio:.2f} of off "
                f"({r['resources']} vs {off['resources']} resources; target: at most x1.2)"
            )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
