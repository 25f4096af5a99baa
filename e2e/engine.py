"""The real Pulumi engine on a local file backend, running the repository's program.

:class:`Stack` is one project + stack in a temporary folder: ``PULUMI_HOME`` and the
``file://`` state there, a passphrase secrets provider, the stack config written from
``Pulumi.<stack>.yaml`` (or a test's edit of it) with its kubeconfig context pointing at a local
control plane. The project folder holds links to the repository's ``__main__.py``,
``components/`` and ``.venv`` (which ``Pulumi.yaml`` names), so the program that runs is the
repository's own; only the stack config file is the test's. A test that needs another version of
the program on the same state (an earlier commit's, unpacked by ``git archive``) links that
folder's ``__main__.py`` and ``components/`` instead (:meth:`Stack.use_program`).

The binaries come from :mod:`e2e.toolchain` (``engine``: the Pulumi CLI and a small Python
language host; ``k8sprovider``: pulumi-resource-kubernetes), put first on ``PATH``: the engine
loads the provider from there (an ambient plugin) and downloads nothing
(``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION``).

The operators' charts come from a chart mirror, the product's own ``gpuaas:charts.directory``
(:func:`mirror`: the whole upstream charts in ../shared/upstream/charts), so every Helm release
installs the real chart with our values through the real provider, and every workload is awaited
as on a real cluster. :class:`NetworkOperatorStandIn` plays the Network Operator where the
program waits on it (the NicClusterPolicy's ``pulumi.com/waitFor``).

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
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from components.loader import gpuaas_section, parse_config
from components.model import charts
from components.model.config import StackConfig
from components.model.versions import Versions
from components.operators import nic_cluster_policy
from e2e import toolchain, upstream
from e2e.kube import ApiError, Kube
from e2e.kueue import KueueManager
from e2e.processes import Poller

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = upstream.upstream_dir()
PASSPHRASE = "gpuaas-e2e-local-backend"  # a throwaway local backend: not a secret of anything
ENGINE_SETS = ("engine", "k8sprovider")
#: What the project folder links from the folder of the program that runs (:meth:`Stack.use_program`);
#: the virtualenv (``.venv``, which ``Pulumi.yaml`` names) is always the repository's.
PROGRAM_FILES = ("__main__.py", "components")


def bin_dirs() -> list[Path]:
    """The engine's bin directories (built once per version, see e2e/toolchain.py)."""
    return [toolchain.build(toolchain.TOOLSETS[s]) for s in ENGINE_SETS]


# --------------------------------------------------------------------------------------------
# the charts


def mirror() -> Path:
    """The e2e's chart mirror: the upstream fixtures' whole charts (network-operator v26.4.1,
    gpu-operator v26.7.0, kueue v0.19.2), each unpacked at its git tag as ``<chart>-<tag>/``,
    which the product's ``gpuaas:charts.directory`` reads as it reads any mirror. Every file of
    the charts the stacks install is checked against its upstream blob id first."""
    folder = upstream.upstream_dir() / "charts"
    for c in charts.stack_charts(Versions(), elastic=True, hami=True):
        found = charts.source(charts.Charts(directory=str(folder)), c)
        upstream.require(Path(found.chart).relative_to(upstream.upstream_dir()))
    return folder


def with_mirror(config: Mapping[str, Any], charts: Path | None) -> dict[str, Any]:
    """``config`` with ``gpuaas:charts.directory`` set to ``charts`` (unless the config says
    where its charts come from itself, or ``charts`` is ``None``)."""
    out = copy.deepcopy(dict(config))
    if charts is not None and "gpuaas:charts" not in out:
        out["gpuaas:charts"] = {"directory": str(charts)}
    return out


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


def repo_stack_config(stack: str, file: Path | None = None) -> dict[str, Any]:
    """``Pulumi.<stack>.yaml`` or ``file`` (the tests pass their own stacks) as a dict (its ``config`` and all)."""
    doc = yaml.safe_load((file or ROOT / f"Pulumi.{stack}.yaml").read_text())
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
        charts: Path | None = None,
        program: Path = ROOT,
    ) -> None:
        """``charts``: the chart mirror every config written gets (default :func:`mirror`);
        ``program``: the folder whose ``__main__.py`` and ``components/`` run (default the repository)."""
        self.stack = stack
        self.charts = charts if charts is not None else mirror()
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gpuaas-engine-"))
        self.project = self.workdir / "project"
        self.home = self.workdir / "home"
        self.state = self.workdir / "state"
        for d in (self.project, self.home, self.state):
            d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "Pulumi.yaml", self.project / "Pulumi.yaml")
        self.use_program(program)
        venv = self.project / ".venv"
        if not venv.exists():
            venv.symlink_to(ROOT / ".venv")
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
            "NO_COLOR": "1",
        }
        self.log: list[Result] = []

    def use_program(self, folder: Path) -> None:
        """Run ``folder``'s ``__main__.py`` and ``components/`` from now on, on the same state and
        config: the links are replaced, the virtualenv stays the repository's."""
        for name in PROGRAM_FILES:
            if not (folder / name).exists():
                raise FileNotFoundError(f"{folder} has no {name}: not a gpuaas program folder")
            link = self.project / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(folder / name)

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
        """Replace the stack's ``config`` block, keeping what ``stack init`` wrote (the salt); the
        charts come from :attr:`charts` unless ``config`` names its own ``gpuaas:charts``."""
        doc = yaml.safe_load(self.config_file.read_text()) if self.config_file.exists() else None
        doc = doc if isinstance(doc, dict) else {}
        doc["config"] = with_mirror(config, self.charts)
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


#: What the Network Operator creates that our objects use: the ``multus`` ServiceAccount, which
#: gpuaas's Multus kubeconfig refresher runs as (network-operator v26.4.1
#: manifests/state-multus-cni/0020-service_account.yml). Without it the DaemonSet gets no pods.
NETWORK_OPERATOR_SERVICE_ACCOUNTS = ("multus",)


class NetworkOperatorStandIn(Poller):
    """Plays the Network Operator where the program waits on it: reports every NicClusterPolicy
    ``status.state: ready`` through the status subresource, as the operator does once its states
    are ready (what ``pulumi.com/waitFor`` waits on), and creates the ServiceAccounts it would
    create in its namespace (:data:`NETWORK_OPERATOR_SERVICE_ACCOUNTS`) once that exists."""

    def __init__(self, kube: Kube, every: float = 0.5, namespace: str = "nvidia-network-operator") -> None:
        super().__init__("network-operator-standin", every)
        self.kube, self.namespace = kube, namespace
        self.reported: set[str] = set()
        self._made: set[str] = set()

    def tick(self) -> None:
        api = nic_cluster_policy.API_VERSION
        with contextlib.suppress(ApiError, OSError, KeyError, LookupError):
            wanted = set(NETWORK_OPERATOR_SERVICE_ACCOUNTS)
            if self._made != wanted and self.kube.get("v1", "Namespace", self.namespace):
                for name in NETWORK_OPERATOR_SERVICE_ACCOUNTS:
                    meta = {"name": name, "namespace": self.namespace}
                    self.kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
                    self._made.add(name)
            if not self.kube.served(api, "NicClusterPolicy"):
                return
            for ncp in self.kube.list(api, "NicClusterPolicy"):
                name = ncp["metadata"]["name"]
                if (ncp.get("status") or {}).get("state") == "ready":
                    continue
                self.kube.patch(api, "NicClusterPolicy", name, None, {"status": {"state": "ready"}}, sub="status")
                self.reported.add(name)


class Operators:
    """Everything the test plays while the engine runs a stack on the fleet, as one context:
    the Network Operator's part (:class:`NetworkOperatorStandIn`) and, where the stack's queues are
    elastic, Kueue's manager serving the chart's webhooks (:class:`e2e.kueue.KueueManager`, which
    waits for the chart that ``pulumi up`` installs).

        with Operators(kube, cfg) as ops:
            stack.up()
    """

    def __init__(self, kube: Kube, cfg: StackConfig, kueue_overrides: Mapping[str, Any] | None = None) -> None:
        self.network = NetworkOperatorStandIn(kube, namespace=cfg.network.namespace)
        self.kueue = KueueManager(kube, cfg.queues.namespace, overrides=kueue_overrides) if cfg.queues.elastic else None

    def __enter__(self) -> Operators:
        self.network.__enter__()
        if self.kueue is not None:
            self.kueue.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.kueue is not None:
            self.kueue.__exit__(*exc)
        self.network.__exit__(*exc)


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
        f"  charts from the mirror {s.charts} (gpuaas:charts.directory); edit {s.config_file} to change\n"
        "  the stack; `exit` leaves. While this shell runs, the test's stand-ins play the operators where\n"
        "  `pulumi up` waits on them: the Network Operator (NicClusterPolicy ready, its ServiceAccounts) and,\n"
        "  with elastic queues, Kueue's manager serving the chart's webhooks (e2e/kueue.py).",
        flush=True,
    )
    env = s.shell_env() | {"PS1": f"(gpuaas-engine {stack}) \\w $ "}
    cfg = parse_config(gpuaas_section(repo_stack_config(stack)["config"]))
    with Operators(kube_of(kubeconfig), cfg):
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
