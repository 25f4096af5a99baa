"""The real Pulumi engine on a local file backend, running the repository's program.

:class:`Stack` is one project + stack in a temporary folder: ``PULUMI_HOME`` and the
``file://`` state there, a passphrase secrets provider, the stack config written from
``Pulumi.<stack>.yaml`` (or a test's edit of it) with its kubeconfig context pointing at a local
control plane. The project folder holds links to the repository's ``__main__.py``,
``components/`` and ``.venv`` (which ``Pulumi.yaml`` names), so the program that runs is the
repository's own; only the stack config file is the test's.

The binaries come from :mod:`e2e.toolchain` (``engine``: the Pulumi CLI and a small Python
language host; ``k8sprovider``: pulumi-resource-kubernetes), put first on ``PATH``: the engine
loads the provider from there (an ambient plugin) and downloads nothing
(``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION``).

The operators' charts are not reachable offline: :func:`standin_charts` writes, per release, a
local chart with the chart's real name and version that holds only its upstream CRDs (from
../shared/upstream, at the pinned chart version), and the program installs it through the
test-only switch ``GPUAAS_E2E_STANDIN_CHARTS`` (components/k8s.py), which also skips the awaits
of workloads that only a kubelet could make ready. :class:`NetworkOperatorStandIn` plays the
Network Operator where the program waits on it (the NicClusterPolicy's ``pulumi.com/waitFor``).

    python -m e2e.engine shell [--stack onprem]   # a shell with PATH, backend and passphrase set
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from components.k8s import E2E_STANDIN_CHARTS_ENV
from components.model import versions
from components.operators import gpu_operator, network_operator, nic_cluster_policy
from e2e import toolchain, upstream
from e2e.kube import ApiError, Kube

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = upstream.upstream_dir()
PASSPHRASE = "gpuaas-e2e-local-backend"  # a throwaway local backend: not a secret of anything
ENGINE_SETS = ("engine", "k8sprovider")
PROJECT_FILES = ("__main__.py", "components", ".venv")


def bin_dirs() -> list[Path]:
    """The engine's bin directories (built once per version, see e2e/toolchain.py)."""
    return [toolchain.build(toolchain.TOOLSETS[s]) for s in ENGINE_SETS]


# --------------------------------------------------------------------------------------------
# stand-in charts


@dataclasses.dataclass(frozen=True)
class StandIn:
    chart: str  # the chart name the program installs (components/*.CHART)
    version: str  # the pinned chart version (components/model/versions.py)
    upstream: Path  # the chart's folder in ../shared/upstream at that version


def standins() -> list[StandIn]:
    root = upstream.root()  # every file read from it checked against its upstream blob id
    return [
        StandIn(
            network_operator.CHART,
            versions.NETWORK_OPERATOR_CHART,
            root / "network-operator" / versions.NETWORK_OPERATOR_CHART,
        ),
        StandIn(gpu_operator.CHART, versions.GPU_OPERATOR_CHART, root / "gpu-operator" / versions.GPU_OPERATOR_CHART),
        # Kueue's chart is an OCI reference; ../shared/upstream keeps its CRDs only (no Chart.yaml).
        StandIn("kueue", versions.KUEUE_CHART, root / "kueue" / f"v{versions.KUEUE_CHART.lstrip('v')}"),
    ]


def standin_charts(dest: Path) -> Path:
    """Write one local chart per release under ``dest``: the chart's name (upstream Chart.yaml),
    the pinned version (the upstream tree's Chart.yaml may carry a development placeholder,
    e.g. the GPU Operator's ``v1.0.0-devel``), and the chart's own ``crds/`` (Helm installs
    those before anything else)."""
    for s in standins():
        # Kueue's folder holds no Chart.yaml: look before joining (a checked join refuses a file not there).
        has_chart = (Path(str(s.upstream)) / "Chart.yaml").is_file()
        meta = yaml.safe_load((s.upstream / "Chart.yaml").read_text()) if has_chart else {"name": s.chart}
        out = dest / s.chart
        (out / "crds").mkdir(parents=True, exist_ok=True)
        chart = {
            "apiVersion": "v2",
            "name": meta["name"],
            "version": s.version.lstrip("v"),
            "appVersion": s.version,
            "description": f"e2e stand-in for {meta['name']} {s.version}: its upstream CRDs only",
            "type": "application",
        }
        (out / "Chart.yaml").write_text(yaml.safe_dump(chart, sort_keys=False))
        for crd in sorted((s.upstream / "crds").glob("*.y*ml")):
            shutil.copyfile(crd, out / "crds" / crd.name)
    return dest


# --------------------------------------------------------------------------------------------
# the stack


@dataclasses.dataclass
class Result:
    args: list[str]
    rc: int
    out: str
    seconds: float

    def __str__(self) -> str:
        return f"pulumi {' '.join(self.args)} -> {self.rc} in {self.seconds:.1f} s\n{self.out}"


class PulumiError(AssertionError):
    def __init__(self, result: Result) -> None:
        super().__init__(str(result)[-12000:])
        self.result = result


def repo_stack_config(stack: str) -> dict[str, Any]:
    """The checked-in ``Pulumi.<stack>.yaml`` as a dict (its ``config`` block and all)."""
    doc = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


class Stack:
    """One stack of the repository's program on a temporary local backend."""

    def __init__(
        self,
        kubeconfig: Path,
        stack: str = "onprem",
        workdir: Path | None = None,
        bins: Sequence[Path] | None = None,
    ) -> None:
        self.stack = stack
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gpuaas-engine-"))
        self.project = self.workdir / "project"
        self.home = self.workdir / "home"
        self.state = self.workdir / "state"
        self.charts = self.workdir / "charts"
        for d in (self.project, self.home, self.state):
            d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "Pulumi.yaml", self.project / "Pulumi.yaml")
        for name in PROJECT_FILES:
            link = self.project / name
            if not link.exists():
                link.symlink_to(ROOT / name)
        standin_charts(self.charts)
        self.bins = list(bins) if bins is not None else bin_dirs()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")},
            "PATH": os.pathsep.join([*map(str, self.bins), os.environ.get("PATH", "")]),
            "PULUMI_HOME": str(self.home),
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
            "KUBECONFIG": str(kubeconfig),
            E2E_STANDIN_CHARTS_ENV: str(self.charts),
            "NO_COLOR": "1",
        }
        self.log: list[Result] = []

    # ---------------------------------------------------------------------------------------
    def pulumi(self, *args: str, check: bool = True, timeout: float = 600) -> Result:
        cmd = ["pulumi", *args, "--non-interactive"] if args and args[0] != "version" else ["pulumi", *args]
        t0 = time.monotonic()
        p = subprocess.run(
            cmd,
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
        res = Result(list(args), p.returncode, p.stdout, time.monotonic() - t0)
        self.log.append(res)
        if check and p.returncode != 0:
            raise PulumiError(res)
        return res

    def version(self) -> str:
        return self.pulumi("version").out.strip()

    def init(self, config: Mapping[str, Any] | None = None) -> Stack:
        """Log in to the file backend, create the stack with a passphrase secrets provider and
        write its config (the checked-in one unless ``config`` is given)."""
        self.pulumi("login", f"file://{self.state}")
        self.pulumi("stack", "init", self.stack, "--secrets-provider", "passphrase")
        self.write_config(config if config is not None else repo_stack_config(self.stack)["config"])
        return self

    @property
    def config_file(self) -> Path:
        return self.project / f"Pulumi.{self.stack}.yaml"

    def write_config(self, config: Mapping[str, Any]) -> None:
        """Replace the stack's ``config`` block, keeping what ``stack init`` wrote (the salt)."""
        doc = yaml.safe_load(self.config_file.read_text()) if self.config_file.exists() else None
        doc = doc if isinstance(doc, dict) else {}
        doc["config"] = copy.deepcopy(dict(config))
        self.config_file.write_text(yaml.safe_dump(doc, sort_keys=False))

    def config(self) -> dict[str, Any]:
        doc = yaml.safe_load(self.config_file.read_text())
        return copy.deepcopy(doc["config"])

    def up(self, *extra: str, check: bool = True, timeout: float = 900) -> Result:
        return self.pulumi("up", "--yes", "--skip-preview", *extra, check=check, timeout=timeout)

    def preview(self, *extra: str, check: bool = True, timeout: float = 600) -> Result:
        return self.pulumi("preview", "--diff", *extra, check=check, timeout=timeout)

    def preview_json(self, *extra: str) -> dict[str, Any]:
        res = self.pulumi("preview", "--json", *extra)
        return dict(json.loads(res.out[res.out.index("{") :]))

    def outputs(self) -> dict[str, Any]:
        res = self.pulumi("stack", "output", "--json", "--show-secrets")
        return dict(json.loads(res.out))

    def export(self) -> dict[str, Any]:
        return dict(json.loads(self.pulumi("stack", "export").out))

    def resources(self) -> list[dict[str, Any]]:
        return list(self.export()["deployment"].get("resources") or [])

    def shell_env(self) -> dict[str, str]:
        return dict(self.env)


# --------------------------------------------------------------------------------------------
# the Network Operator's part


class NetworkOperatorStandIn:
    """Reports every NicClusterPolicy ``status.state: ready`` through the status subresource,
    as the Network Operator does once its states are ready (what ``pulumi.com/waitFor`` waits on)."""

    def __init__(self, kube: Kube, every: float = 0.5) -> None:
        self.kube, self.every = kube, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="network-operator-standin", daemon=True)
        self.reported: set[str] = set()

    def __enter__(self) -> NetworkOperatorStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        api = nic_cluster_policy.API_VERSION
        while not self._stop.wait(self.every):
            with contextlib.suppress(ApiError, OSError, KeyError, LookupError):
                if not self.kube.served(api, "NicClusterPolicy"):
                    continue
                for ncp in self.kube.list(api, "NicClusterPolicy"):
                    name = ncp["metadata"]["name"]
                    if (ncp.get("status") or {}).get("state") == "ready":
                        continue
                    self.kube.patch(api, "NicClusterPolicy", name, None, {"status": {"state": "ready"}}, sub="status")
                    self.reported.add(name)


# --------------------------------------------------------------------------------------------
# the shell


def _context_of(stack: str) -> str:
    platform = repo_stack_config(stack)["config"].get("gpuaas:platform", {})
    return str(platform.get("kubeconfigContext", "gpuaas-e2e"))


def shell(stack: str, kubeconfig: Path, workdir: Path | None) -> int:
    """An interactive shell in a project folder wired to the local backend (see Makefile
    ``engine-shell``): ``pulumi preview`` / ``pulumi up`` of ``stack`` run against ``kubeconfig``."""
    s = Stack(kubeconfig, stack=stack, workdir=workdir)
    print(s.version(), flush=True)
    if not (s.state / ".pulumi" / "stacks").exists() or not s.config_file.exists():
        s.init()
    else:
        s.pulumi("login", f"file://{s.state}")
    print(
        f"e2e engine shell: stack {stack} in {s.project}, state file://{s.state}, KUBECONFIG={kubeconfig}\n"
        f"  edit {s.config_file} to change the stack; `exit` leaves. While this shell runs, a stand-in\n"
        "  for the Network Operator reports the NicClusterPolicy ready (what `pulumi up` waits on).",
        flush=True,
    )
    env = s.shell_env() | {"PS1": f"(gpuaas-engine {stack}) \\w $ "}
    with NetworkOperatorStandIn(kube_of(kubeconfig)):
        return subprocess.call([os.environ.get("SHELL", "/bin/bash")], cwd=s.project, env=env)


def kube_of(kubeconfig: Path) -> Kube:
    """An admin client from a kubeconfig that e2e.controlplane wrote (token + CA file)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    ctx = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
    cluster = next(c for c in doc["clusters"] if c["name"] == ctx["cluster"])["cluster"]
    user = next(u for u in doc["users"] if u["name"] == ctx["user"])["user"]
    return Kube(cluster["server"], user["token"], Path(cluster["certificate-authority"]))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.engine", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sh = sub.add_parser("shell", help="a shell with the engine on PATH, the local backend and passphrase set")
    sh.add_argument("--stack", default="onprem")
    sh.add_argument("--kubeconfig", type=Path, default=None, help="default: the one `make cluster` wrote")
    sh.add_argument("--workdir", type=Path, default=ROOT / ".engine", help="project, backend and PULUMI_HOME")
    sub.add_parser("version", help="build if needed and print the Pulumi CLI version")
    args = ap.parse_args(argv)
    if args.cmd == "version":
        for d in bin_dirs():
            print(d, file=sys.stderr)
        print(subprocess.run([str(bin_dirs()[0] / "pulumi"), "version"], capture_output=True, text=True).stdout.strip())
        return 0
    kubeconfig = args.kubeconfig or ROOT / ".cluster" / "kubeconfig"
    if not kubeconfig.is_file():
        print(
            f"e2e.engine: no kubeconfig at {kubeconfig}: run `make cluster STACK={args.stack}` first", file=sys.stderr
        )
        return 2
    return shell(args.stack, kubeconfig.resolve(), args.workdir)


@contextlib.contextmanager
def stack_on(kubeconfig: Path, **kw: Any) -> Iterator[Stack]:
    s = Stack(kubeconfig, **kw)
    try:
        yield s
    finally:
        if not os.environ.get("GPUAAS_E2E_KEEP"):
            shutil.rmtree(s.workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
