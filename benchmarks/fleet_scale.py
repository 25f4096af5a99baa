"""Scale benchmark of the simulated fleet: the 1000-node / 256-team plan on KWOK nodes, and the engine.

The fleet of ``benchmarks/plan_scale.py``'s synthetic config (1000 nodes of 8 GPUs and 8 HCAs in 4
node groups, 256 teams, the first 6 with partitions), with elastic quotas on so Kueue has work: the
real control plane with kube-scheduler and KWOK (e2e/fleet.py), the nodes from the suite's oracle
(tests/e2e/fleet_nodes.py). Measured, one run, pinned to 2 cores:

- the offline plan of that config (the baseline of the ratios);
- the nodes created and Ready; the plan applied (server-side apply, install order);
- every DaemonSet ready (desired = ready = the RDMA nodes);
- Kueue's manager up with 256 active ClusterQueues; one Job per team admitted and Running; then a
  borrow wave (every team asks for twice its quota): time until admissions settle, how many were
  admitted by borrowing, every admitted pod Running;
- peak memory of the control plane (the sum of etcd, kube-apiserver, kube-controller-manager,
  kube-scheduler, KWOK and Kueue, sampled every second; and each one's own peak, VmHWM);
- with ``--engine``: ``pulumi up`` of the same config from empty against the fleet and a no-change
  ``pulumi preview``, each beside the offline plan's time (target: preview ≤ 60 s on 2 cores).

Not a test: ``make bench-fleet`` (or ``python benchmarks/fleet_scale.py``); results in
bench-out/fleet_scale.json and BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.loader import gpuaas_section, parse_config  # noqa: E402
from components.plan.offline import gc_paused, run_program  # noqa: E402
from e2e import toolchain  # noqa: E402
from e2e.fleet import Fleet, play_operators  # noqa: E402
from e2e.kube import Kube  # noqa: E402
from e2e.plan_apply import install_crds  # noqa: E402
from e2e.processes import Poller  # noqa: E402
from tests.e2e.fleet_kueue import FleetKueue  # noqa: E402
from tests.e2e.fleet_nodes import fleet_nodes  # noqa: E402
from tests.e2e.jobs import queued_job  # noqa: E402
from tests.e2e.kueue_manager import kueue_crds  # noqa: E402

CORES = 2
GPU = "nvidia.com/gpu"


def _plan_scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_scale", ROOT / "benchmarks" / "plan_scale.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: Whole GPUs a team is guaranteed in the benchmark: elastic quotas must fit the node group that holds
#: them (full-a: a quarter of the nodes), which the plan benchmark's 8 per team (with
#: ``allowOversubscription``) does not at 256 teams.
TEAM_GPUS = 4


def bench_config(nodes: int, teams: int) -> dict[str, Any]:
    """plan_scale.py's synthetic fleet with elastic quotas on (guaranteed quotas that fit, no oversubscription)."""
    config: dict[str, Any] = copy.deepcopy(_plan_scale().synthetic_config(nodes, teams))
    config.pop("gpuaas:quotaPolicy", None)
    for team in config["gpuaas:teams"]:
        team["quota"]["gpus"] = TEAM_GPUS
    config["gpuaas:queues"] = {"elastic": True}
    config["gpuaas:platform"]["kubeconfigContext"] = "bench-fleet"
    return config


class Results(dict[str, Any]):
    """The measurements, each printed as it is taken (a run takes many minutes)."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        print(f"bench-fleet: {key} = {value}", file=sys.stderr, flush=True)


class Memory(Poller):
    """Sum of the RSS of the fleet's processes, sampled every second; each one's VmHWM at the end."""

    def __init__(self) -> None:
        super().__init__("bench-memory", 1.0)
        self.pids: dict[str, int] = {}
        self.peak_mb = 0.0

    @staticmethod
    def _status(pid: int, key: str) -> float:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def tick(self) -> None:
        self.peak_mb = max(self.peak_mb, sum(self._status(p, "VmRSS") for p in self.pids.values()))

    def high_water(self) -> dict[str, float]:
        return {name: round(self._status(pid, "VmHWM"), 1) for name, pid in self.pids.items()}


def _until(what: str, cond: Any, timeout: float, every: float = 1.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return round(time.monotonic() - t0, 1)
        time.sleep(every)
    raise TimeoutError(f"{what}: not reached in {timeout:.0f} s")


def _daemonsets_ready(kube: Kube, want: int) -> bool:
    dss = kube.list("apps/v1", "DaemonSet")
    return bool(dss) and all(
        d.get("status", {}).get("numberReady") == d.get("status", {}).get("desiredNumberScheduled") == want for d in dss
    )


def _job(ns: str, queue: str, name: str, gpus: int) -> dict[str, Any]:
    return queued_job(ns, name, queue, {GPU: str(gpus)}, cpu="1", memory="1Gi")


def _active(cq: dict[str, Any]) -> bool:
    return any(x["type"] == "Active" and x["status"] == "True" for x in cq.get("status", {}).get("conditions") or [])


def _running_pods(kube: Kube, prefix: str) -> int:
    return sum(
        1
        for p in kube.list("v1", "Pod")
        if p["metadata"]["name"].startswith(prefix) and p.get("status", {}).get("phase") == "Running"
    )


def _admitted_count(kube: Kube, namespaces: list[str], prefix: str) -> int:
    return sum(
        1
        for j in kube.list("batch/v1", "Job")
        if j["metadata"]["namespace"] in namespaces
        and j["metadata"]["name"].startswith(prefix)
        and not j["spec"].get("suspend")
    )


def _borrowed(kube: Kube) -> int:
    total = 0
    for cq in kube.list("kueue.x-k8s.io/v1beta2", "ClusterQueue"):
        for f in cq.get("status", {}).get("flavorsUsage") or []:
            for r in f["resources"]:
                if r["name"] == GPU:
                    total += int(str(r.get("borrowed", "0")))
    return total


def fleet_part(config: dict[str, Any], out: dict[str, Any]) -> None:
    cfg = parse_config(gpuaas_section(config))
    t0, c0 = time.perf_counter(), time.process_time()
    with gc_paused():
        run = run_program("bench", config=config)
    out["offline_plan_s"] = round(time.perf_counter() - t0, 1)
    out["offline_plan_cpu_s"] = round(time.process_time() - c0, 1)
    out["plan_objects"] = sum(1 for r in run.records if r.custom)
    specs = fleet_nodes(cfg)
    rdma = sum(1 for s in specs if s.mellanox)
    out["nodes"] = len(specs)
    mem = Memory()
    fleet = Fleet.start([])
    workdir = Path(tempfile.mkdtemp(prefix="gpuaas-bench-fleet-"))
    manager = FleetKueue(fleet, workdir, cfg)
    try:
        for p in fleet.cp.procs:
            mem.pids[p.name] = p.popen.pid
        mem.start()
        kube = fleet.kube
        t = time.monotonic()
        fleet.add_nodes([s.manifest() for s in specs], timeout=1800)
        out["nodes_ready_s"] = round(time.monotonic() - t, 1)
        install_crds(kube, kueue_crds(manager.webhook_port))
        t = time.monotonic()
        fleet.apply(run)
        out["apply_s"] = round(time.monotonic() - t, 1)
        out["applied_objects"] = len(fleet.applied)
        play_operators(kube, cfg.network.namespace)
        out["daemonsets_ready_s"] = _until("every DaemonSet ready", lambda: _daemonsets_ready(kube, rdma), 1800, 2)
        out["daemonset_pods"] = sum(1 for p in kube.list("v1", "Pod", cfg.network.namespace))
        # Kueue: the plan's proof Jobs go first (the scenario counts from zero)
        for team in cfg.teams:
            for j in kube.list("batch/v1", "Job", team.ns):
                kube.request("DELETE", kube.resource("batch/v1", "Job").path(team.ns, j["metadata"]["name"]),
                             {"propagationPolicy": "Background"})  # fmt: skip
        t = time.monotonic()
        manager.start(toolchain.build(toolchain.TOOLSETS["kueue"]))
        assert manager.proc is not None
        mem.pids["kueue"] = manager.proc.pid
        _until("the cert rotator's Secret", manager.mount_certs, 120)
        _until("Kueue ready", manager.ready, 600)
        names = [t.name for t in cfg.teams]

        def active() -> bool:
            cqs = kube.list("kueue.x-k8s.io/v1beta2", "ClusterQueue")
            ok = [
                c
                for c in cqs
                if any(
                    x["type"] == "Active" and x["status"] == "True" for x in c.get("status", {}).get("conditions") or []
                )
            ]
            return len(ok) == len(names)

        out["kueue_ready_s"] = round(time.monotonic() - t + _until("every ClusterQueue active", active, 900, 2), 1)
        namespaces = [t.ns for t in cfg.teams]
        quota = {t.name: t.quota.gpus for t in cfg.teams}
        t = time.monotonic()
        for team in cfg.teams:
            kube.create(_job(team.ns, team.name, "one", max(1, quota[team.name] // 2)))
        out["jobs_wave1"] = len(cfg.teams)
        out["admit_one_per_team_s"] = _until(
            "one Job per team admitted", lambda: _admitted_count(kube, namespaces, "one") == len(names), 900, 2
        )
        _until("their pods Running", lambda: _running_pods(kube, "one-") == len(names), 900, 2)
        out["running_one_per_team_s"] = round(time.monotonic() - t, 1)
        # the borrow wave: every team asks for its whole quota again, beyond what it holds
        t = time.monotonic()
        for team in cfg.teams:
            kube.create(_job(team.ns, team.name, "wave", quota[team.name]))
        last, stable_since = -1, time.monotonic()
        while time.monotonic() - stable_since < 20 and time.monotonic() - t < 1200:
            n = _admitted_count(kube, namespaces, "wave")
            if n != last:
                last, stable_since = n, time.monotonic()
            time.sleep(2)
        out["borrow_wave_settled_s"] = round(stable_since - t, 1)
        out["borrow_wave_admitted"] = last
        out["borrowed_gpus"] = _borrowed(kube)
        _until("the wave's admitted pods Running", lambda: _running_pods(kube, "wave-") == last, 900, 2)
        out["borrow_wave_running_s"] = round(time.monotonic() - t, 1)
    finally:
        out["peak_mb_sum"] = round(mem.peak_mb, 1)
        out["peak_mb_each"] = mem.high_water()
        mem.stop()
        manager.stop()
        fleet.stop()


class Progress(Poller):
    """The engine's checkpoint read every ``every`` seconds: how many resources it holds when.

    With checkpoints on, the local backend rewrites the whole stack file after every step; the
    series shows whether the cost of a step grows with the stack (what it would if each step wrote
    the whole state). With ``PULUMI_SKIP_CHECKPOINTS`` there is nothing to read until the end.
    """

    def __init__(self, state: Path, every: float = 60.0) -> None:
        super().__init__("bench-progress", every)
        self.state = state
        self.samples: list[tuple[float, int, int]] = []
        self._t0 = time.monotonic()

    def _read(self) -> tuple[int, int] | None:
        for f in self.state.glob(".pulumi/stacks/*/*.json"):
            try:
                raw = f.read_bytes()
                doc = json.loads(raw)
            except (OSError, ValueError):
                return None
            return len((doc.get("checkpoint", {}).get("latest") or {}).get("resources") or []), len(raw)
        return None

    def tick(self) -> None:
        got = self._read()
        if got is not None:
            self.samples.append((round(time.monotonic() - self._t0), *got))
            print(f"bench-fleet: engine progress {self.samples[-1]}", file=sys.stderr, flush=True)


def _state_bytes(state: Path) -> int:
    return sum(f.stat().st_size for f in state.glob(".pulumi/stacks/*/*.json"))


def engine_part(config: dict[str, Any], out: dict[str, Any], *, skip_checkpoints: bool, parallel: int | None) -> None:
    """``pulumi up`` from empty and a no-change preview of the same config against a fleet of its nodes.

    ``skip_checkpoints``: the engine saves the stack's state once at the end instead of after every
    step (``PULUMI_SKIP_CHECKPOINTS``; Pulumi v3.274.0 pkg/backend/snapshot.go: the default service
    loop serialises, verifies and writes the whole snapshot on every mutation, two per resource;
    the unsafe one only at the end, so a crash mid-``up`` loses the record of what was created). It
    is not gated on ``PULUMI_EXPERIMENTAL``, which is left unset: that would also make every ``up``
    and ``preview`` generate an update plan. ``parallel``: ``pulumi up/preview --parallel`` (the CLI's
    default otherwise).
    """
    from e2e.engine import Operators, Stack
    from e2e.plan_apply import install_prerequisites

    cfg = parse_config(gpuaas_section(config))
    specs = fleet_nodes(cfg)
    fleet = Fleet.start([s.manifest() for s in specs], timeout=1800)
    try:
        kubeconfig = fleet.cp.write_kubeconfig(fleet.cp.workdir / "engine.kubeconfig", context="bench-fleet")
        stack = Stack(kubeconfig, stack="bench")
        if skip_checkpoints:
            stack.env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        extra = [f"--parallel={parallel}"] if parallel else []
        out["engine_checkpoints"] = "final only" if skip_checkpoints else "every step"
        out["engine_parallel"] = parallel or "default"
        # The Prometheus stack the platform plugs into (observability) is there before it.
        install_prerequisites(fleet.kube, run_program("bench", config=config))
        stack.init({k: v for k, v in config.items()})
        with Operators(fleet.kube, cfg):
            with Progress(stack.state) as progress:
                up = stack.up(*extra, timeout=5400)
            out["engine_up_s"] = round(up.seconds, 1)
            out["engine_up_progress"] = progress.samples
            out["engine_state_bytes"] = _state_bytes(stack.state)
            preview = stack.preview("--expect-no-changes", *extra, timeout=1800)
            out["engine_preview_s"] = round(preview.seconds, 1)
        out["engine_resources"] = len(stack.resources())
    finally:
        fleet.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--teams", type=int, default=256)
    ap.add_argument("--engine", action="store_true", help="also pulumi up / preview through the real engine")
    ap.add_argument("--no-fleet", action="store_true", help="only the engine part")
    ap.add_argument(
        "--skip-checkpoints",
        action="store_true",
        help="engine: save the state at the end only (PULUMI_SKIP_CHECKPOINTS)",
    )
    ap.add_argument("--parallel", type=int, default=None, help="engine: pulumi up/preview --parallel")
    ap.add_argument("--cores", type=int, default=CORES)
    ap.add_argument("--json", type=Path, default=ROOT / "bench-out" / "fleet_scale.json")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        # the children (control plane, KWOK, Kueue, the engine) inherit the affinity
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cores])
    config = bench_config(args.nodes, args.teams)
    out: dict[str, Any] = Results(nodes_config=args.nodes, teams=args.teams, cores=args.cores)
    try:
        if not args.no_fleet:
            fleet_part(config, out)
        if args.engine:
            if "offline_plan_s" not in out:
                t0 = time.perf_counter()
                with gc_paused():
                    run_program("bench", config=config)
                out["offline_plan_s"] = round(time.perf_counter() - t0, 1)
            engine_part(config, out, skip_checkpoints=args.skip_checkpoints, parallel=args.parallel)
            out["up_vs_plan"] = round(out["engine_up_s"] / out["offline_plan_s"], 1)
            out["preview_vs_plan"] = round(out["engine_preview_s"] / out["offline_plan_s"], 1)
    finally:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
