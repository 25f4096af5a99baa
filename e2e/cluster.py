"""`make cluster`: the simulated fleet of a stack with its plan applied, left running for hands-on use.

    python -m e2e.cluster up [onprem|aks]   # start, apply the plan, print KUBECONFIG; returns
    python -m e2e.cluster down              # stop it (and remove its state)

``up`` starts a detached supervisor (its own session) that owns etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and KWOK — they die with it — creates the stack's nodes as
KWOK nodes (tests/e2e/fleet_nodes.py: the suite's node oracle, so the cluster is the fleet the e2e
tests prove things on; AKS: one node per pool), applies the plan, plays what the operators would
have created (e2e/fleet.py), and waits until the plan is applied. Pods are scheduled by the real
scheduler and run by KWOK: ``kubectl get pods -o wide`` shows where. The Kubernetes
minor is ``$GPUAAS_E2E_KUBERNETES`` (``make cluster KUBERNETES=1.35``) or the newest; ``up`` prints
the kubectl of that version (the control-plane tool set's, within the version skew). The
kubeconfig's context is named like the stack's ``platform.kubeconfigContext`` (``onprem-admin``),
so ``pulumi preview`` of the checked-in stack can target it unchanged. State lives in
``.cluster/`` of the checkout (ignored by git).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from components.plan.stacks import stack_names

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".cluster"


def _context_of(stack: str) -> str:
    from components.loader import gpuaas_section, parse_config
    from components.plan.offline import stack_config

    cfg = parse_config(gpuaas_section(stack_config(stack)))
    ctx = getattr(cfg.platform, "kubeconfig_context", None)
    return str(ctx or f"gpuaas-{stack}")


def serve(stack: str) -> int:
    """The supervisor: start, apply, write the kubeconfig, then wait for SIGTERM."""
    from components.loader import gpuaas_section, parse_config
    from components.plan.offline import run_program, stack_config
    from e2e.fleet import Fleet, play_operators
    from tests.e2e.fleet_nodes import fleet_nodes

    stop = False

    def _term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    shutil.rmtree(STATE / "run", ignore_errors=True)  # certs and keys are made anew per start
    cfg = parse_config(gpuaas_section(stack_config(stack)))
    nodes = [spec.manifest() for spec in fleet_nodes(cfg)]
    fleet: Fleet | None = None
    try:
        fleet = Fleet.start(nodes, run=run_program(stack), workdir=STATE / "run")
        play_operators(fleet.kube, cfg.network.namespace)
        cp = fleet.cp
        cp.write_kubeconfig(STATE / "kubeconfig", context=_context_of(stack))
        ready = f"{cp.version()} {cp.server} {len(fleet.applied)} {len(nodes)} {cp.kubectl_path}\n"
        (STATE / "ready").write_text(ready)
        while not stop:
            time.sleep(0.5)
    except Exception as e:
        (STATE / "failed").write_text(f"{type(e).__name__}: {e}\n")
        return 1
    finally:
        if fleet is not None:
            fleet.stop()
    return 0


def _pid() -> int | None:
    try:
        pid = int((STATE / "pid").read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def up(stack: str) -> int:
    if _pid() is not None:
        print(
            f"cluster: already running (pid {_pid()}); KUBECONFIG={STATE / 'kubeconfig'}; `make cluster-down` stops it"
        )
        return 0
    STATE.mkdir(exist_ok=True)
    for f in ("ready", "failed", "kubeconfig"):
        (STATE / f).unlink(missing_ok=True)
    log = (STATE / "supervisor.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "e2e.cluster", "serve", stack],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    (STATE / "pid").write_text(str(proc.pid))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if (STATE / "ready").exists():
            version, server, count, nodes, kubectl = (STATE / "ready").read_text().split()
            kc = STATE / "kubeconfig"
            print(
                f"cluster: kube-apiserver {version} at {server} with kube-scheduler and KWOK: {nodes} nodes, "
                f"{count} objects of the {stack} plan applied"
            )
            print(f"  kubectl {version} (within the version skew): {kubectl}")
            print(f"  export KUBECONFIG={kc}")
            print(f"  alias kubectl={kubectl}")
            print("  kubectl get nodes -L gpuaas.io/node-group,nvidia.com/mig.config")
            print("  kubectl get pods -A -o wide                                          # where each pod runs")
            print("  kubectl --as=alice --as-group=oidc:team-vision -n language get pods   # refused: another team")
            print("  make cluster-down                                                    # stops it")
            return 0
        if (STATE / "failed").exists() or proc.poll() is not None:
            print(f"cluster: failed: {(STATE / 'failed').read_text() if (STATE / 'failed').exists() else ''}")
            print((STATE / "supervisor.log").read_text()[-4000:])
            return 1
        time.sleep(0.3)
    print("cluster: not ready after 600 s; see .cluster/supervisor.log")
    return 1


def down() -> int:
    pid = _pid()
    if pid is None:
        print("cluster: not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    for _ in range(120):
        if _pid() is None:
            break
        time.sleep(0.25)
    else:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for f in ("pid", "ready", "kubeconfig"):
        (STATE / f).unlink(missing_ok=True)
    print("cluster: stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.cluster")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("up", "serve"):
        p = sub.add_parser(name)
        # Every Pulumi.<stack>.yaml of the checkout: the samples are examples a team replaces.
        p.add_argument("stack", nargs="?", default="onprem", choices=stack_names())
    sub.add_parser("down")
    args = ap.parse_args(argv)
    if args.cmd == "up":
        return up(args.stack)
    if args.cmd == "serve":
        return serve(args.stack)
    return down()


if __name__ == "__main__":
    raise SystemExit(main())
