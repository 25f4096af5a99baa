"""The tool sets the e2e suite builds: each a Go module under ``e2e/`` and its binaries.

The control plane once per supported Kubernetes minor (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kubectl in one multi-call binary), Kueue, the Pulumi
engine and the Kubernetes provider, Helm, KWOK, Prometheus, and the node's own CNI code built
from the upstream sources folder. Each with the version stamps upstream's own Makefile sets and
what a build needs that upstream generates. :mod:`e2e.toolchain` builds them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from e2e import upstream as fixtures
from e2e.gomodule import E2E, Target, ToolSet, download_json, pinned_version, required_versions, say


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
    info = download_json(PULUMI_SDK, "v" + requirement("pulumi"), ts.module_dir)
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
        Path(download_json(K8S_PROVIDER, v[K8S_PROVIDER], ts.module_dir)["Dir"]) / "cmd" / "pulumi-resource-kubernetes"
    )
    schema = json.loads((src / "schema.json").read_text())
    schema["version"] = k8s_provider_release(v)
    mapping = json.loads((src / "terraform-mapping.json").read_text())
    for rel, doc in zip(K8S_PROVIDER_EMBEDS, (schema, mapping), strict=True):
        (ts.module_dir / rel).write_text(json.dumps(doc, separators=(",", ":")))


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


HELM = "helm.sh/helm/v3"


def _helm_stamp(v: dict[str, str]) -> list[str]:
    # What helm's Makefile stamps (LDFLAGS): its version, and the Kubernetes version of the k8s.io
    # modules it links as the default for `helm template` (K8S_MODULES_MAJOR/MINOR_VER: client-go
    # v0.33.3 is Kubernetes 1.33).
    base = f"{HELM}/internal/version"
    minor = v["k8s.io/client-go"].lstrip("v").split(".")[1]
    out = [f"-X {base}.version={v[HELM]}", f"-X {base}.gitTreeState=clean"]
    for pkg in ("pkg/lint/rules", "pkg/chartutil"):
        out += [f"-X {HELM}/{pkg}.k8sVersionMajor=1", f"-X {HELM}/{pkg}.k8sVersionMinor={minor}"]
    return out


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
    src = Path(download_json(KWOK, pinned_version(ts), ts.module_dir)["Dir"])
    docs = [(src / f).read_text().strip() for f in KWOK_DEFAULT_STAGES]
    head = f"# KWOK {pinned_version(ts)}'s default stages ({', '.join(KWOK_DEFAULT_STAGES)})\n"
    return head + "\n---\n".join(d.removeprefix("---").strip() for d in docs) + "\n"


PROMETHEUS = "github.com/prometheus/prometheus"


def _prometheus_stamp(v: dict[str, str]) -> list[str]:
    # What .promu.yml stamps; the release (3.16.0) is the module's VERSION file (v0.316.0).
    release = (Path(download_json(PROMETHEUS, v[PROMETHEUS], E2E / "prometheus")["Dir"]) / "VERSION").read_text()
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
    # The Helm CLI at the version pulumi-resource-kubernetes links (helm.sh/helm/v3 v3.18.6, the
    # same k8s.io libraries): the e2e installs a plan's Helm releases with it where no engine
    # runs (e2e/plan_apply.py), as the provider would.
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
