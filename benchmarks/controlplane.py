"""Benchmark of the real control plane: start-up, and applying each stack's plan to it.

Measures, on this machine: the control plane's start (etcd, kube-apiserver, kube-controller-
manager up and the ``default`` ServiceAccount made), the server-side apply of every stack's plan
(each ``Pulumi.<stack>.yaml`` of the checkout: the samples, or a team's own), a second (no-op)
apply, and the scale benchmark's 1000-node / 256-team fleet. Not a test:
``python benchmarks/controlplane.py`` (the binaries come from ``make e2e-tools``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.plan.offline import run_program  # noqa: E402
from components.plan.stacks import stack_names  # noqa: E402
from e2e.controlplane import ControlPlane  # noqa: E402
from e2e.plan_apply import apply_plan, planned_objects  # noqa: E402


def _timed(fn: Any) -> tuple[float, Any]:
    t = time.monotonic()
    out = fn()
    return time.monotonic() - t, out


def _synthetic(nodes: int, teams: int) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("plan_scale", ROOT / "benchmarks" / "plan_scale.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg: dict[str, Any] = mod.synthetic_config(nodes, teams)
    return cfg


def main() -> int:
    rows: list[dict[str, Any]] = []
    cases: list[tuple[str, str, dict[str, Any] | None]] = [
        *((stack, stack, None) for stack in stack_names()),
        ("1000 nodes / 256 teams", "bench", _synthetic(1000, 256)),
    ]
    for label, stack, config in cases:
        cp = ControlPlane()
        try:
            start, _ = _timed(cp.start)
            run = run_program(stack, config=config)
            objs = len(planned_objects(run))
            first, _ = _timed(lambda run=run, cp=cp: apply_plan(cp.kube, run))
            second, _ = _timed(lambda run=run, cp=cp: apply_plan(cp.kube, run))
            row = {
                "case": label,
                "objects": objs,
                "start_s": round(start, 1),
                "apply_s": round(first, 1),
                "reapply_s": round(second, 1),
                "server": cp.version(),
            }
        except Exception as e:
            row = {"case": label, "error": str(e)[:300]}
        finally:
            cp.stop()
        rows.append(row)
        print(json.dumps(row), flush=True)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
