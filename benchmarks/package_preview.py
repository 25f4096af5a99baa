"""Benchmark of the component package: the provider's start-up, and a no-change preview through it.

Measures, on this machine:

- the component provider's start-up: ``python provider/ <engine>`` until it prints its port (the
  imports of the components and the SDK, and the host's analysis of the declarations into the
  schema), what every `pulumi preview` / `up` of a program using the package pays once;
- a no-change `pulumi preview` of the same four components (Network Operator, NicClusterPolicy,
  GPU Operator, one team: tests/e2e/package_consumer.py) through the SDK `pulumi package add`
  generates, beside the same components built in-process by a Python program from the
  repository's classes, each up first on a fresh KWOK fleet, under the real engine.

Not a test: ``python benchmarks/package_preview.py [--previews N]`` (the e2e tools from
``make e2e-tools``; the upstream charts folder as for ``make e2e``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.loader import parse_config  # noqa: E402
from e2e.engine import NetworkOperatorStandIn, mirror  # noqa: E402
from e2e.fleet import Fleet  # noqa: E402
from tests.e2e.fleet_nodes import fleet_nodes  # noqa: E402
from tests.e2e.package_consumer import CONTEXT, IN_PROCESS, STACK, ConsumerStack  # noqa: E402


def provider_start(times: int) -> list[float]:
    """Seconds from spawning the provider to its port on stdout (no engine: it answers nothing)."""
    out = []
    for _ in range(times):
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, str(ROOT / "provider"), "127.0.0.1:1"], stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None
        line = p.stdout.readline()
        out.append(time.monotonic() - t0)
        p.kill()
        p.wait()
        assert line.strip().isdigit(), f"the provider printed {line!r}, not its port"
    return out


def previews(program: str, times: int) -> dict[str, Any]:
    """`up` of ``program`` ('' = through the package) on a fresh fleet, then ``times`` no-change previews."""
    cfg = parse_config({**STACK, "charts": {"directory": str(mirror())}})
    fleet = Fleet.start([spec.manifest() for spec in fleet_nodes(cfg)])
    try:
        kubeconfig = fleet.cp.write_kubeconfig(fleet.cp.workdir / "consumer.kubeconfig", context=CONTEXT)
        stack = ConsumerStack(kubeconfig, program)
        stack.start()
        added = stack.pulumi("package", "add", str(ROOT / "provider")).seconds if not program else None
        with NetworkOperatorStandIn(fleet.kube, namespace=cfg.network.namespace):
            up = stack.up().seconds
            runs = [stack.preview("--expect-no-changes").seconds for _ in range(times)]
        resources = len(stack.resources())
    finally:
        fleet.stop()
    return {
        "package_add_s": None if added is None else round(added, 1),
        "up_s": round(up, 1),
        "preview_s": [round(s, 1) for s in runs],
        "preview_median_s": round(statistics.median(runs), 1),
        "resources": resources,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--previews", type=int, default=3)
    a = p.parse_args(argv)
    start = provider_start(3)
    result = {
        "provider_start_s": [round(s, 2) for s in start],
        "through_the_package": previews("", a.previews),
        "in_process": previews(IN_PROCESS, a.previews),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
