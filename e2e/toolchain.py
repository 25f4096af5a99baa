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
import time
from collections.abc import Sequence
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
    "controlplane",
    "e2e_sets",
    "go_env",
    "kubernetes_minor",
    "pinned_version",
    "staging_replaces",
    "toolset",
]


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
        for ts in e2e_sets():
            build(ts)
        return 0
    out = build(toolset(args.set))
    if args.cmd == "path":
        print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
