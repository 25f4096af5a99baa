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
import dataclasses
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from e2e import upstream as fixtures

E2E = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Target:
    """One binary: its name in the cache, the package to build, and its version stamp."""

    name: str
    package: str
    ldflags: Callable[[dict[str, str]], list[str]] = lambda _v: []
    # Set for a file that is copied from the Go module cache instead of built (a script that
    # upstream ships next to a binary): returns its path there.
    copy_from: Callable[[ToolSet], Path] | None = None
    # Set for a file written from what the module holds (KWOK's default stages): its text.
    render: Callable[[ToolSet], str] | None = None
    # Names this binary also answers to (a multi-call binary dispatching on argv[0]): symlinks
    # to it in the bin directory.
    links: tuple[str, ...] = ()
    # Go build tags (``go build -tags``).
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ToolSet:
    """A Go module under ``e2e/`` and the binaries built from it."""

    name: str
    module_dir: Path
    # The module whose required version names the set (k8s.io/kubernetes, ...).
    version_of: str
    targets: tuple[Target, ...]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    # Writes files the build needs that upstream generates (paths under module_dir, gitignored,
    # listed in ``generated`` so that they stay out of the cache key).
    prepare: Callable[[ToolSet], None] | None = None
    generated: tuple[str, ...] = ()
    # Files outside the module that decide a target too (requirements.txt's SDK pin).
    key_files: tuple[Path, ...] = ()
    # Called first (by the cache key, so before any go command): checks and links what the set
    # builds from outside the repository (the upstream sources its replace directives name),
    # fails with SystemExit naming what is missing, and returns bytes that join the cache key.
    stage: Callable[[ToolSet], bytes] | None = None
    # The go.mod this set builds with, in module_dir: another than ``go.mod`` is passed as
    # ``-modfile`` (its go.sum is the same name with ``.sum``), so several sets share one
    # directory of sources (the control plane of each Kubernetes minor).
    modfile: str = "go.mod"
    # The set's name in the cache directory (default: ``name``); the version follows it.
    cache_name: str = ""

    @property
    def modflags(self) -> list[str]:
        return [] if self.modfile == "go.mod" else [f"-modfile={self.modfile}"]

    @property
    def sumfile(self) -> str:
        return self.modfile.removesuffix(".mod") + ".sum"


def _k8s_stamp(v: dict[str, str]) -> list[str]:
    version = v["k8s.io/kubernetes"]
    major, minor = version.lstrip("v").split(".")[:2]
    base = "k8s.io/component-base/version"
    return [
        f"-X {base}.gitVersion={version}",
        f"-X {base}.gitMajor={major}",
        f"-X {base}.gitMinor={minor}",
        f"-X {base}.gitTreeState=clean",
        f"-X {base}.buildDate=1970-01-01T00:00:00Z",
    ]


def _kueue_stamp(v: dict[str, str]) -> list[str]:
    # What kueue's own Makefile stamps (LD_FLAGS: version_pkg GitVersion/GitCommit/BuildDate).
    base = "sigs.k8s.io/kueue/pkg/version"
    return [f"-X {base}.GitVersion={v['sigs.k8s.io/kueue']}", f"-X {base}.BuildDate=1970-01-01"]


REPO = E2E.parent


def requirement(name: str) -> str:
    """The version requirements.txt pins for ``name``: the Python SDK pins decide the engine too."""
    m = re.search(rf"^{re.escape(name)}==(\S+)", (REPO / "requirements.txt").read_text(), re.M)
    if not m:
        raise SystemExit(f"toolchain: requirements.txt pins no {name}")
    return m.group(1)


PULUMI_PKG = "github.com/pulumi/pulumi/pkg/v3"
PULUMI_SDK = "github.com/pulumi/pulumi/sdk/v3"
K8S_PROVIDER = "github.com/pulumi/pulumi-kubernetes/provider/v4"
# provider/v4 has no tags of its own (only the repository's v4.x.y): the proxy serves it by
# pseudo-version, v4.0.0-<commit time>-<commit>. This maps the commit to the release tagged there.
K8S_PROVIDER_RELEASES = {"f47bc2d6f199": "4.25.0"}


def _pulumi_stamp(v: dict[str, str]) -> list[str]:
    return [f"-X {PULUMI_SDK}/go/common/version.Version={v[PULUMI_PKG]}"]


def _langhost_stamp(v: dict[str, str]) -> list[str]:
    # Our own host (e2e/engine/cmd/pulumi-language-python): the SDK module it is built on, marked.
    return [f"-X main.version={v[PULUMI_SDK].lstrip('v')}+gpuaas.e2e"]


def _python_exec_script(ts: ToolSet) -> Path:
    """pulumi-language-python-exec from the sdk/v3 module zip at the pinned Python SDK's version.

    The exec script runs the program inside the SDK (its settings, the monitor connection), so it
    must match the SDK in the virtualenv, not the CLI.
    """
    info = _download_json(PULUMI_SDK, "v" + requirement("pulumi"), ts.module_dir)
    return Path(info["Dir"]) / "python" / "cmd" / "pulumi-language-python-exec"


def k8s_provider_release(v: dict[str, str]) -> str:
    commit = v[K8S_PROVIDER].rsplit("-", 1)[1]
    if commit not in K8S_PROVIDER_RELEASES:
        raise SystemExit(f"toolchain: {K8S_PROVIDER}@{v[K8S_PROVIDER]}: no release known for commit {commit}")
    return K8S_PROVIDER_RELEASES[commit]


def _k8s_provider_stamp(v: dict[str, str]) -> list[str]:
    return [f"-X {K8S_PROVIDER}/pkg/version.Version={k8s_provider_release(v)}"]


K8S_PROVIDER_EMBEDS = (
    "cmd/pulumi-resource-kubernetes/schema-embed.json",
    "cmd/pulumi-resource-kubernetes/terraform-mapping-embed.json",
)


def _k8s_provider_embeds(ts: ToolSet) -> None:
    """Write what upstream's generate.go writes: the schema with the release version set, and the
    Terraform mapping, both re-serialised from the module's committed JSON."""
    v = required_versions(ts)
    src = (
        Path(_download_json(K8S_PROVIDER, v[K8S_PROVIDER], ts.module_dir)["Dir"]) / "cmd" / "pulumi-resource-kubernetes"
    )
    schema = json.loads((src / "schema.json").read_text())
    schema["version"] = k8s_provider_release(v)
    mapping = json.loads((src / "terraform-mapping.json").read_text())
    for rel, doc in zip(K8S_PROVIDER_EMBEDS, (schema, mapping), strict=True):
        (ts.module_dir / rel).write_text(json.dumps(doc, separators=(",", ":")))


HELM = "helm.sh/helm/v3"


def _helm_stamp(v: dict[str, str]) -> list[str]:
    # What helm's Makefile stamps (LDFLAGS: internal/version's version and gitTreeState).
    base = f"{HELM}/internal/version"
    return [f"-X {base}.version={v[HELM]}", f"-X {base}.gitTreeState=clean"]


# --------------------------------------------------------------------------------------------
# The node's own code (Multus, ib-sriov-cni) from the upstream sources in ../shared/upstream/src

#: The modules e2e/cni/go.mod replaces with folders of <upstream>/src: the module proxy refuses
#: ib-sriov-cni at every version and the checksum database does not know rdma-cni v1.3.0.
CNI_SOURCES = (
    "multus-cni-v4.3.0",
    "network-attachment-definition-client-v1.7.6",
    "ib-sriov-cni-v1.3.0",
    "rdma-cni-v1.3.0",
)
MULTUS = "gopkg.in/k8snetworkplumbingwg/multus-cni.v4"
IB_SRIOV_CNI = "github.com/k8snetworkplumbingwg/ib-sriov-cni"


def _stage_cni_sources(ts: ToolSet) -> bytes:
    """Link ``e2e/cni/upstream`` to ``<upstream>/src`` once every file of the four source folders
    matches its blob id in the folder's ``MANIFEST-charts-src.tsv`` (and no file is extra); the
    rows checked are the key. The upstream folder is :mod:`e2e.upstream`'s (``$GPUAAS_UPSTREAM``).

    The link, never a copy: go.mod's replace directives name ``./upstream/<folder>``.
    """
    up = fixtures.upstream_dir()
    try:
        ids = fixtures.blob_ids(up)
    except fixtures.UpstreamError as e:
        raise SystemExit(f"toolchain: {ts.name}: Multus and ib-sriov-cni are built from {up / 'src'}: {e}") from None
    src = up / "src"
    missing = [f"src/{d}" for d in CNI_SOURCES if not (src / d).is_dir()]
    if missing:
        raise SystemExit(
            f"toolchain: {ts.name}: the upstream sources are expected in {src} ({', '.join(missing)} missing); "
            f"set {fixtures.ENV} to the folder that holds them (default ../shared/upstream)"
        )
    rows = {p: b for p, b in ids.items() if p.startswith("src/") and p.split("/")[1] in CNI_SOURCES}
    on_disk = {f"src/{p.relative_to(src)}" for d in CNI_SOURCES for p in (src / d).rglob("*") if p.is_file()}
    changed = sorted(p for p in rows if p not in on_disk or fixtures.blob_id((up / p).read_bytes()) != rows[p])
    extra = sorted(on_disk - rows.keys())
    if changed or extra:
        raise SystemExit(
            f"toolchain: {ts.name}: {src} does not hold the sources its MANIFEST-charts-src.tsv names: "
            f"missing or changed {changed[:5]}, not listed {extra[:5]}"
        )
    link = ts.module_dir / "upstream"
    if link.exists() and not link.is_symlink():
        raise SystemExit(f"toolchain: {link} must be a link to {src}, not a copy: remove it")
    if not link.is_symlink() or os.readlink(link) != str(src):
        tmp = link.with_name(".upstream.partial")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(src, target_is_directory=True)
        os.replace(tmp, link)
    return "".join(f"{p}\t{rows[p]}\n" for p in sorted(rows)).encode()


def _multus_stamp(v: dict[str, str]) -> list[str]:
    return [f"-X {MULTUS}/pkg/multus.version={v[MULTUS]}"]


def _ib_sriov_stamp(v: dict[str, str]) -> list[str]:
    return [f"-X main.version={v[IB_SRIOV_CNI]}"]


# The Kubernetes minors the e2e control plane is built for, each with its go.mod in
# e2e/controlplane (generated by `gomod controlplane --kubernetes vX.Y.Z`): the newest supported
# minor by default, and the oldest supported one for the `every_minor` part of the suite.
KUBERNETES_MODFILES = {"1.37": "go.mod", "1.35": "go.1.35.mod"}
DEFAULT_KUBERNETES = "1.37"
# Which minor ``controlplane`` (and ControlPlane() without a bin_dir) means: `make KUBERNETES=1.35`.
KUBERNETES_ENV = "GPUAAS_E2E_KUBERNETES"
# The names the control plane's multi-call binary answers to (e2e/controlplane/cmd/kube).
CONTROLPLANE_TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


def kubernetes_minor(minor: str | None = None) -> str:
    """``minor``, else ``$GPUAAS_E2E_KUBERNETES``, else the default; a ``v`` and a patch are dropped."""
    raw = minor or os.environ.get(KUBERNETES_ENV) or DEFAULT_KUBERNETES
    want = ".".join(raw.strip().lstrip("v").split(".")[:2])
    if want not in KUBERNETES_MODFILES:
        known = ", ".join(sorted(KUBERNETES_MODFILES))
        raise SystemExit(f"toolchain: no control plane for Kubernetes {raw!r} (built for: {known})")
    return want


def _controlplane(minor: str) -> ToolSet:
    return ToolSet(
        name=f"controlplane-{minor}",
        cache_name="controlplane",
        module_dir=E2E / "controlplane",
        version_of="k8s.io/kubernetes",
        # One binary (one link, one copy of the shared packages) for all five programs.
        targets=(Target("kube", "./cmd/kube", _k8s_stamp, links=CONTROLPLANE_TOOLS),),
        modfile=KUBERNETES_MODFILES[minor],
    )


def controlplane(minor: str | None = None) -> ToolSet:
    """The control-plane tool set of ``minor`` (see :func:`kubernetes_minor`)."""
    return TOOLSETS[f"controlplane-{kubernetes_minor(minor)}"]


KWOK = "sigs.k8s.io/kwok"
# The stages kwokctl gives a kwok it starts when no Stage is configured (pkg/kwokctl/runtime/
# cluster.go, getDefaultNodeStages / getDefaultPodStages; the heartbeat with a lease, as for
# --node-lease-duration-seconds > 0): nodes become Ready, pods on them Running, Job pods
# Succeeded, deleted pods go. The `kwok` binary alone loads stages only from --config.
KWOK_DEFAULT_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def _kwok_stages(ts: ToolSet) -> str:
    src = Path(_download_json(KWOK, pinned_version(ts), ts.module_dir)["Dir"])
    docs = [(src / f).read_text().strip() for f in KWOK_DEFAULT_STAGES]
    head = f"# KWOK {pinned_version(ts)}'s default stages ({', '.join(KWOK_DEFAULT_STAGES)})\n"
    return head + "\n---\n".join(d.removeprefix("---").strip() for d in docs) + "\n"


PROMETHEUS = "github.com/prometheus/prometheus"


def _prometheus_stamp(v: dict[str, str]) -> list[str]:
    # What .promu.yml stamps; the release (3.16.0) is the module's VERSION file (v0.316.0).
    release = (Path(_download_json(PROMETHEUS, v[PROMETHEUS], E2E / "prometheus")["Dir"]) / "VERSION").read_text()
    base = "github.com/prometheus/common/version"
    return [f"-X {base}.Version={release.strip()}", f"-X {base}.Branch=HEAD", f"-X {base}.BuildDate=19700101-00:00:00"]


# Prometheus's build tags: `remove_all_sd` leaves out every service-discovery plugin but file and
# http (plugins/plugin_*.go; promtool still imports kubernetes SD itself). No `builtinassets`:
# the web UI is built by npm into web/ui/static, which the module zip lacks; the API, what the
# tests use, needs no assets.
PROMETHEUS_TAGS = ("remove_all_sd",)

TOOLSETS: dict[str, ToolSet] = {
    **{f"controlplane-{m}": _controlplane(m) for m in KUBERNETES_MODFILES},
    # Kueue's controller manager (sigs.k8s.io/kueue v0.19.2: its go.mod has no replace lines to copy).
    "kueue": ToolSet(
        name="kueue",
        module_dir=E2E / "kueue",
        version_of="sigs.k8s.io/kueue",
        targets=(Target("kueue", "sigs.k8s.io/kueue/cmd/kueue", _kueue_stamp),),
    ),
    # The Pulumi CLI at the nearest version the proxy serves to the Python SDK's (see
    # README "The real engine against a local control plane"), our small Python language host, and the
    # SDK's exec script.
    "engine": ToolSet(
        name="engine",
        module_dir=E2E / "engine",
        version_of=PULUMI_PKG,
        targets=(
            Target("pulumi", f"{PULUMI_PKG}/cmd/pulumi", _pulumi_stamp),
            Target("pulumi-language-python", "./cmd/pulumi-language-python", _langhost_stamp),
            Target("pulumi-language-python-exec", "", copy_from=_python_exec_script),
        ),
        key_files=(REPO / "requirements.txt",),
    ),
    "k8sprovider": ToolSet(
        name="k8sprovider",
        module_dir=E2E / "k8sprovider",
        version_of=K8S_PROVIDER,
        targets=(Target("pulumi-resource-kubernetes", "./cmd/pulumi-resource-kubernetes", _k8s_provider_stamp),),
        prepare=_k8s_provider_embeds,
        generated=K8S_PROVIDER_EMBEDS,
    ),
    # The Helm CLI at the version pulumi-resource-kubernetes links (helm.sh/helm/v3 v3.18.6): the e2e
    # suite renders charts with it (`helm template --kube-version`) as the provider would.
    "helm": ToolSet(
        name="helm",
        module_dir=E2E / "helm",
        version_of=HELM,
        targets=(Target("helm", f"{HELM}/cmd/helm", _helm_stamp),),
    ),
    # KWOK's controller (sigs.k8s.io/kwok v0.8.0, cmd/kwok) and the default stages it runs with.
    "kwok": ToolSet(
        name="kwok",
        module_dir=E2E / "kwok",
        version_of=KWOK,
        targets=(
            Target("kwok", f"{KWOK}/cmd/kwok"),
            Target("kwok-stages.yaml", "", render=_kwok_stages),
        ),
    ),
    "prometheus": ToolSet(
        name="prometheus",
        module_dir=E2E / "prometheus",
        version_of=PROMETHEUS,
        targets=(
            Target("promtool", f"{PROMETHEUS}/cmd/promtool", _prometheus_stamp, tags=PROMETHEUS_TAGS),
            Target("prometheus", f"{PROMETHEUS}/cmd/prometheus", _prometheus_stamp, tags=PROMETHEUS_TAGS),
        ),
    ),
    # The node side of a pod's networks (e2e/cni): Multus' thin plugin and ib-sriov-cni from the
    # shared upstream sources, our harness over Multus' own packages, and a stand-in delegate.
    # ib-sriov-cni gets two files of testdata/overlay through overlay.json (a probe that runs its
    # config handling without hardware; tests/e2e/test_ib_sriov_cni_sets_no_guid_it_was_not_given.py).
    "cni": ToolSet(
        name="cni",
        module_dir=E2E / "cni",
        version_of=MULTUS,
        targets=(
            Target("multus", f"{MULTUS}/cmd/multus", _multus_stamp),
            Target("ib-sriov-cni", f"{IB_SRIOV_CNI}/cmd/ib-sriov-cni", _ib_sriov_stamp),
            Target("cni-harness", "./cmd/cni-harness"),
            Target("cni-standin", "./cmd/cni-standin"),
        ),
        # -overlay for the whole set: it only adds files to ib-sriov-cni's packages.
        env={"GOFLAGS": f"{os.environ.get('GOFLAGS', '-mod=readonly')} -overlay=overlay.json"},
        stage=_stage_cni_sources,
    ),
}


def say(msg: str) -> None:
    print(f"toolchain: {msg}", file=sys.stderr, flush=True)


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")
    # Never a workspace of the caller's: each set's go.mod alone decides what is built.
    env["GOWORK"] = "off"
    env.setdefault("GOFLAGS", "-mod=readonly")
    return env


def required_versions(ts: ToolSet) -> dict[str, str]:
    """Module path -> version of every requirement in the set's go.mod (the replace targets win)."""
    out = subprocess.run(
        ["go", "list", *ts.modflags, "-m", "-json", "all"],
        cwd=ts.module_dir,
        env=go_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    versions: dict[str, str] = {}
    for chunk in _json_stream(out):
        rep = chunk.get("Replace") or {}
        versions[str(chunk["Path"])] = str(rep.get("Version") or chunk.get("Version", ""))
    return versions


def _json_stream(text: str) -> list[dict[str, Any]]:
    dec = json.JSONDecoder()
    i, items = 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        items.append(obj)
    return items


def cache_root() -> Path:
    return Path(os.environ.get("GPUAAS_TOOLS_CACHE") or Path.home() / ".cache" / "gpuaas-tools")


def _go_version() -> str:
    return subprocess.run(
        ["go", "env", "GOVERSION"], env=go_env(), check=True, capture_output=True, text=True
    ).stdout.strip()


def cache_key(ts: ToolSet) -> str:
    """A hash of everything that decides the binaries: the set's go.mod and go.sum, our sources
    and build settings (targets, tags, links), Go itself."""
    staged = ts.stage(ts) if ts.stage is not None else b""
    h = hashlib.sha256(_go_version().encode())
    if staged:
        h.update(staged)
    skip = {ts.module_dir / g for g in ts.generated}
    for f in sorted(ts.module_dir.rglob("*")):
        if f in skip or not f.is_file():
            continue
        if f.suffix in {".go", ".json"} or f.name in {ts.modfile, ts.sumfile}:
            h.update(str(f.relative_to(ts.module_dir)).encode())
            h.update(f.read_bytes())
    for f in ts.key_files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    # Links and tags change what is built from the same files (hashed only where set, so the
    # keys of the sets without them stay as they were).
    extras = [(t.name, t.links, t.tags) for t in ts.targets if t.links or t.tags]
    if extras:
        h.update(repr(extras).encode())
    return h.hexdigest()[:12]


def pinned_version(ts: ToolSet) -> str:
    """The version the set is named for, read from its go.mod without running go (cheap)."""
    text = (ts.module_dir / ts.modfile).read_text()
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(ts.version_of)}\s+(v\S+)", text, re.M)
    if not m:
        raise SystemExit(f"toolchain: {ts.module_dir}/{ts.modfile} does not require {ts.version_of}")
    return m.group(1)


def bin_dir(ts: ToolSet) -> Path:
    return cache_root() / f"{ts.cache_name or ts.name}-{pinned_version(ts)}-{cache_key(ts)}" / "bin"


def _names(ts: ToolSet) -> list[str]:
    return [n for t in ts.targets for n in (t.name, *t.links)]


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


def _download_json(module: str, version: str, cwd: Path) -> dict[str, str]:
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        env=go_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    info: dict[str, str] = json.loads(res.stdout)
    return info


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
    info = _download_json("k8s.io/kubernetes", version, ts.module_dir)
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


def toolset(name: str) -> ToolSet:
    """A set by name; ``controlplane`` is the minor :func:`kubernetes_minor` selects."""
    return controlplane() if name == "controlplane" else TOOLSETS[name]


def e2e_sets() -> list[ToolSet]:
    """What ``build all`` builds: every set, but only the selected minor's control plane when
    ``$GPUAAS_E2E_KUBERNETES`` names one (else every minor's: the default ``make e2e`` runs both)."""
    chosen = os.environ.get(KUBERNETES_ENV)
    keep = {controlplane().name} if chosen else {f"controlplane-{m}" for m in KUBERNETES_MODFILES}
    sets = [ts for name, ts in TOOLSETS.items() if not name.startswith("controlplane-") or name in keep]
    if fixtures.opted_out() and not fixtures.present():
        # Sets built from the upstream folder's sources (cni): their tests skip under the opt-out.
        staged = [ts.name for ts in sets if ts.stage is not None]
        say(f"{fixtures.OPT_OUT}=1 and no {fixtures.upstream_dir()}: not building {', '.join(staged)}")
        sets = [ts for ts in sets if ts.stage is None]
    return sets


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
