"""Build the real programs the e2e suite runs, from Go modules only, once per version.

Each tool set is a small Go module under ``e2e/`` whose ``go.mod`` pins the upstream module
(the control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl in
one multi-call binary, once per supported Kubernetes minor; the Pulumi engine; Kueue; KWOK;
Prometheus). ``build`` compiles its commands with ``go build`` into a cache outside the clone,
keyed by the set's version and a hash of its ``go.mod``/``go.sum``/sources and the Go version, so
a second run costs a stat call. Nothing but Go modules is downloaded (through the module proxy),
and nothing built is committed.

    python -m e2e.toolchain build controlplane     # prints what it builds, wall and CPU time
    python -m e2e.toolchain build controlplane-1.35
    python -m e2e.toolchain path controlplane      # the bin directory (builds first if needed)
    python -m e2e.toolchain gomod controlplane --kubernetes v1.35.4   # regenerate that minor's go.mod

``controlplane`` is the minor ``$GPUAAS_E2E_KUBERNETES`` names (``make e2e KUBERNETES=1.35``), or
the default (:data:`DEFAULT_KUBERNETES`). One module directory (``e2e/controlplane``) serves every
minor: the default's ``go.mod``, another minor's ``go.<minor>.mod`` (``go build -modfile``), the
same sources. The cache is ``$GPUAAS_TOOLS_CACHE`` or ``~/.cache/gpuaas-tools``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path

# What the rest of the e2e code and the tests read through ``toolchain``: the sets and the cache.
from e2e.gomodule import E2E, ToolSet, bin_dir, download_json, go_env, pinned_version, required_versions, say
from e2e.gomodule import names as _names
from e2e.toolsets import (
    CNI_SOURCES,
    CONTROLPLANE_TOOLS,
    DEFAULT_KUBERNETES,
    KUBERNETES_ENV,
    KUBERNETES_MODFILES,
    TOOLSETS,
    controlplane,
    e2e_sets,
    kubernetes_minor,
    toolset,
)

__all__ = [
    "CNI_SOURCES",
    "CONTROLPLANE_TOOLS",
    "DEFAULT_KUBERNETES",
    "E2E",
    "KUBERNETES_ENV",
    "KUBERNETES_MODFILES",
    "TOOLSETS",
    "bin_dir",
    "build",
    "build_all",
    "chains",
    "controlplane",
    "e2e_sets",
    "go_env",
    "jobs",
    "kubernetes_minor",
    "pinned_version",
    "staging_replaces",
    "toolset",
]

#: How many tool sets ``build all`` builds at once (``$GPUAAS_TOOLS_JOBS``). One ``go build`` keeps
#: about 1.6 of two cores busy over all sets (1.9 on the big ones; its links and package loading
#: run on one thread), and two at a time did fill both cores, but each set then cost 10-25 % more
#: CPU: the cold build took 2356 s two at a time against 2330 s one at a time (BENCHMARKS.md "Cold
#: build of the e2e tools"). So one at a time by default (each set's CPU figure its own); two on a
#: machine with more cores.
JOBS_ENV = "GPUAAS_TOOLS_JOBS"
DEFAULT_JOBS = 1


def _cpu_of_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def build(ts: ToolSet) -> Path:
    """Build every target of ``ts`` that the cache lacks; return the bin directory.

    Prints each binary's wall and CPU time (user + system of go and the compilers and linker it
    ran): on a shared machine the CPU time is the figure to compare.
    """
    out = bin_dir(ts)
    if all((out / n).is_file() for n in _names(ts)):
        say(f"{ts.name} {pinned_version(ts)}: cached in {out}")
        return out
    if shutil.which("go") is None:
        raise SystemExit("toolchain: no `go` on PATH; the e2e tools are built from Go modules")
    total, total_cpu = time.monotonic(), _cpu_of_children()
    versions = required_versions(ts)
    tmp = out.parent / "bin.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, exist_ok=True)
    if ts.prepare is not None:
        ts.prepare(ts)
    for t in ts.targets:
        if t.render is not None:
            (tmp / t.name).write_text(t.render(ts))
            say(f"wrote {t.name}")
            continue
        if t.copy_from is not None:
            src = t.copy_from(ts)
            shutil.copyfile(src, tmp / t.name)
            os.chmod(tmp / t.name, 0o755)
            say(f"copied {t.name} from {src}")
            continue
        say(f"building {t.name} ({t.package} @ {versions.get(ts.version_of, '?')}) ...")
        start, cpu = time.monotonic(), _cpu_of_children()
        ldflags = " ".join(["-s", "-w", *t.ldflags(versions)])
        cmd = ["go", "build", *ts.modflags, "-trimpath", "-pgo=off", "-ldflags", ldflags]
        if t.tags:
            cmd += ["-tags", ",".join(t.tags)]
        cmd += ["-o", str(tmp / t.name), t.package]
        res = subprocess.run(cmd, cwd=ts.module_dir, env=go_env() | ts.env)
        if res.returncode != 0:
            raise SystemExit(f"toolchain: go build of {t.package} failed (exit {res.returncode})")
        size = (tmp / t.name).stat().st_size / 2**20
        say(
            f"built {t.name} in {time.monotonic() - start:.0f} s wall, "
            f"{_cpu_of_children() - cpu:.0f} s CPU ({size:.0f} MiB)"
        )
        for link in t.links:
            (tmp / link).symlink_to(t.name)
    out.mkdir(parents=True, exist_ok=True)
    for n in _names(ts):
        os.replace(tmp / n, out / n)
    shutil.rmtree(tmp, ignore_errors=True)
    say(
        f"{ts.name}: {', '.join(_names(ts))} in {time.monotonic() - total:.0f} s wall, "
        f"{_cpu_of_children() - total_cpu:.0f} s CPU -> {out}"
    )
    return out


# --------------------------------------------------------------------------------------------
# go.mod of the control plane, generated from the Kubernetes tag's own go.mod


def staging_replaces(upstream_gomod: str, version: str) -> list[tuple[str, str]]:
    """``k8s.io/x => ./staging/...`` lines of the tag's go.mod as (module, published version).

    Kubernetes v1.X.Y publishes each staging module as v0.X.Y (kubernetes/kubernetes#79384); a
    dependency's replace lines are ignored, so our main module must say them itself.
    """
    minor_patch = ".".join(version.lstrip("v").split(".")[1:3])
    published = f"v0.{minor_patch}"
    mods = re.findall(r"^\s*(\S+)\s+=>\s+\./staging/src/\S+\s*$", upstream_gomod, re.M)
    return [(m, published) for m in sorted(mods)]


def write_controlplane_gomod(version: str) -> None:
    """Write the go.mod (and go.sum) of the control plane of ``version``'s minor from the tag's own.

    It requires k8s.io/kubernetes at ``version`` and etcd's server at the version that tag pins,
    and replaces every staging module with its published version; ``go mod tidy`` adds the rest
    from what cmd/kube imports.
    """
    ts = controlplane(version)
    info = download_json("k8s.io/kubernetes", version, ts.module_dir)
    upstream = Path(info["GoMod"]).read_text()
    go_line = re.search(r"^go (\S+)$", upstream, re.M)
    godebug = re.search(r"^godebug (\S+)$", upstream, re.M)
    etcd = re.search(r"^\s*go\.etcd\.io/etcd/server/v3 (\S+)", upstream, re.M)
    if not (go_line and etcd):
        raise SystemExit("toolchain: unexpected k8s.io/kubernetes go.mod (no go line or etcd server pin)")
    reps = staging_replaces(upstream, version)
    lines = [
        f"// Generated by `python -m e2e.toolchain gomod controlplane --kubernetes {version}` from",
        f"// k8s.io/kubernetes@{version}'s own go.mod: do not edit by hand.",
        "module gpuaas.local/e2e/controlplane",
        "",
        f"go {go_line.group(1)}",
        "",
    ]
    if godebug:
        lines += [f"godebug {godebug.group(1)}", ""]
    lines += [
        "require (",
        f"\tgo.etcd.io/etcd/server/v3 {etcd.group(1)}",
        f"\tk8s.io/kubernetes {version}",
        ")",
        "",
        "replace (",
        *(f"\t{m} => {m} {v}" for m, v in reps),
        ")",
        "",
    ]
    (ts.module_dir / ts.modfile).write_text("\n".join(lines))
    (ts.module_dir / ts.sumfile).touch()
    env = go_env() | {"GOFLAGS": "-mod=mod"}
    subprocess.run(["go", "mod", "tidy", *ts.modflags], cwd=ts.module_dir, env=env, check=True)
    say(f"{ts.modfile}: k8s.io/kubernetes {version}, etcd server {etcd.group(1)}, {len(reps)} staging replaces")


# --------------------------------------------------------------------------------------------
# build all: several sets at once


def jobs() -> int:
    raw = os.environ.get(JOBS_ENV, "").strip() or str(DEFAULT_JOBS)
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"toolchain: {JOBS_ENV}={raw!r}: a whole number of sets at once, 1 or more")
    return int(raw)


def chains(sets: Sequence[ToolSet]) -> list[list[ToolSet]]:
    """``sets`` as chains built one after another, the costliest chain first.

    A set whose ``after`` names another set of ``sets`` joins that set's chain behind it (it
    compiles the same packages, which the first one leaves in the Go build cache; built at the
    same time, both would compile them). Costliest first (``cold_cpu_s``, measured): with two at
    a time, the longest chain starts at once and the short ones fill the other lane.
    """
    by_name = {ts.name: ts for ts in sets}
    heads: dict[str, list[ToolSet]] = {}
    for ts in sets:
        root = ts
        while root.after in by_name:
            root = by_name[root.after]
        heads.setdefault(root.name, []).append(ts)
    out = list(heads.values())
    out.sort(key=lambda chain: -sum(ts.cold_cpu_s for ts in chain))
    return out


def _build_chain(chain: Sequence[ToolSet]) -> None:
    # A process per set: its own rusage of children, so each set's CPU figure is its own.
    for ts in chain:
        res = subprocess.run([sys.executable, "-m", "e2e.toolchain", "build", ts.name], cwd=E2E.parent)
        if res.returncode != 0:
            raise SystemExit(f"toolchain: building {ts.name} failed (exit {res.returncode})")


def build_all(sets: Sequence[ToolSet], at_once: int = 1) -> None:
    """Build every set of ``sets``: one after another, or ``at_once`` chains at a time.

    The first failure stops what has not started and fails with the set's name; what is
    running finishes (a half-built set never reaches the cache: ``build`` moves a complete bin
    directory into place).
    """
    if at_once <= 1:
        for ts in sets:
            build(ts)
        return
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=at_once) as pool:
        futures: list[Future[None]] = [pool.submit(_build_chain, chain) for chain in chains(sets)]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f.exception() for f in done if f.exception() is not None]
        if failed:
            for f in futures:
                f.cancel()
            raise SystemExit(str(failed[0]))
    say(f"all {len(sets)} sets, {at_once} at a time, in {time.monotonic() - start:.0f} s wall")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.toolchain", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    names = ["controlplane", *sorted(TOOLSETS)]
    for name in ("build", "path"):
        p = sub.add_parser(name)
        p.add_argument("set", choices=[*names, *(["all"] if name == "build" else [])])
    g = sub.add_parser("gomod")
    g.add_argument("set", choices=["controlplane"])
    g.add_argument(
        "--kubernetes", default=None, help="the k8s.io/kubernetes tag (default: the selected minor's go.mod pin)"
    )
    args = ap.parse_args(argv)
    if args.cmd == "gomod":
        write_controlplane_gomod(args.kubernetes or pinned_version(controlplane()))
        return 0
    if args.set == "all":
        build_all(e2e_sets(), jobs())
        return 0
    out = build(toolset(args.set))
    if args.cmd == "path":
        print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
