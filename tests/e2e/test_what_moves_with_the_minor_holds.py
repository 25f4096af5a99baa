"""What moves with the Kubernetes minor, on each real server: APIs, Pod Security, feature gates.

Run on the default minor and, marked ``every_minor``, on the oldest supported one (``make e2e``).
The facts are components/model/kubernetes.py's; each test says which server behaviour proves one:

- every API version and kind the plans send is served by this server's discovery, and sending the
  whole plan again (a server-side dry run) draws no deprecation warning;
- every pod template of the plan passes Pod Security in its namespace (the plugin runs before the
  admission policies and quotas, so a refusal by those is a pass here); a privileged pod in a
  ``restricted`` namespace is refused, its compliant twin admitted;
- the feature table says what this server does: DRA fields behind a gate are kept only where the
  gate is on by default, MutatingAdmissionPolicy is served from its GA minor on;
- the table matches the versioned feature gates in the server's own source (k8s.io/kubernetes and
  k8s.io/apiserver at the control plane's tag, from the Go module cache the build filled), and
  Kueue's range matches its README, hack/make/test.mk and go.mod.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.model import kubernetes
from e2e import toolchain
from e2e.controlplane import ControlPlane
from e2e.kube import ApiError, Kube
from e2e.plan_apply import planned_objects
from tests.e2e.conftest import AppliedStack

pytestmark = pytest.mark.every_minor

PLAN_MANAGER = "gpuaas-plan"


@pytest.fixture(params=["onprem", "aks"])
def applied(request: pytest.FixtureRequest) -> AppliedStack:
    return request.getfixturevalue(str(request.param))


def _minor(cp: ControlPlane) -> kubernetes.Minor:
    minor = kubernetes.minor_of(cp.version())
    assert minor is not None, cp.version()
    return minor


# --------------------------------------------------------------------------------------------
# API versions


def test_every_api_version_we_send_is_served_here(applied: AppliedStack) -> None:
    kube = applied.kube
    sent = sorted({(p.obj["apiVersion"], p.obj["kind"]) for p in planned_objects(applied.run)})
    assert ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") in sent
    missing = [f"{v} {k}" for v, k in sent if not kube.served(v, k)]
    assert not missing, f"{applied.cp.version()} does not serve: {missing}"


def _dry_run_apply(kube: Kube, obj: dict[str, Any]) -> None:
    query = {"fieldManager": PLAN_MANAGER, "force": "true", "dryRun": "All"}
    kube.request("PATCH", kube.path_of(obj), obj, content_type="application/apply-patch+yaml", query=query)


def test_sending_the_plan_draws_no_deprecation_warning(applied: AppliedStack) -> None:
    """The server names a deprecated API in a ``Warning`` header; our objects draw none (an Endpoints list does)."""
    kube = applied.kube
    kube.warnings.clear()
    for p in planned_objects(applied.run):
        _dry_run_apply(kube, p.obj)
    deprecated = [w for w in kube.warnings if "deprecated" in w]
    assert deprecated == [], deprecated
    # The twin: v1 Endpoints is deprecated from 1.33 on (use discovery.k8s.io/v1 EndpointSlice).
    kube.request("GET", "/api/v1/endpoints")
    assert any("v1 Endpoints is deprecated" in w for w in kube.warnings), kube.warnings


# --------------------------------------------------------------------------------------------
# Pod Security

_TEMPLATED = {("batch/v1", "Job"), ("apps/v1", "DaemonSet"), ("apps/v1", "Deployment")}
#: Admission after Pod Security (kube-apiserver's plugin order: PodSecurity, then
#: ValidatingAdmissionPolicy, ValidatingAdmissionWebhook, ResourceQuota): its refusal means Pod Security passed.
_LATER = ("ValidatingAdmissionPolicy", "exceeded quota", "must specify limits", "is forbidden: failed quota")


def _pods(run: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for p in planned_objects(run):
        obj = p.obj
        if (obj["apiVersion"], obj["kind"]) not in _TEMPLATED:
            continue
        tmpl = obj["spec"]["template"]
        ns = obj["metadata"]["namespace"]
        name = f"psa-{obj['kind'].lower()}-{obj['metadata']['name']}"[:63].rstrip("-")
        meta = {"name": name, "namespace": ns, "labels": tmpl.get("metadata", {}).get("labels", {})}
        # Pod Security judges the pod's security fields, not its identity: a service account the
        # operators' charts create (not in the plan) would stop it earlier, at ServiceAccount admission.
        spec = {k: v for k, v in tmpl["spec"].items() if k not in ("serviceAccountName", "serviceAccount")}
        out.append(
            (
                f"{ns}/{obj['kind']}/{obj['metadata']['name']}",
                {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
            )
        )
    return out


def test_every_pod_template_passes_pod_security_in_its_namespace(applied: AppliedStack) -> None:
    kube = applied.kube
    pods = _pods(applied.run)
    assert pods, "the plan has workloads"
    refused, unjudged = [], []
    for where, pod in pods:
        kube.warnings.clear()
        try:
            kube.create(pod, dry_run=True)
        except ApiError as err:
            if "PodSecurity" in err.message:
                refused.append(f"{where}: {err.message}")
            elif not any(t in err.message for t in _LATER):
                unjudged.append(f"{where}: {err.message}")
        refused += [f"{where}: {w}" for w in kube.warnings if "PodSecurity" in w]
    assert refused == [], "\n".join(refused)
    assert unjudged == [], "refused before Pod Security could judge:\n" + "\n".join(unjudged)


def test_pod_security_refuses_a_privileged_pod_in_a_restricted_namespace(control_plane: ControlPlane) -> None:
    kube = control_plane.kube
    ns = "psa-restricted"
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
        }
    )
    compliant = {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns}, "spec": compliant}
    assert kube.create(pod, dry_run=True)["metadata"]["name"] == "p"
    privileged = json.loads(json.dumps(pod))
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiError) as err:
        kube.create(privileged, dry_run=True)
    assert 'violates PodSecurity "restricted:latest"' in err.value.message


# --------------------------------------------------------------------------------------------
# Feature gates: the table against the server's behaviour


def _slice(name: str, device: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    devices = {"devices": [{"name": "d0", **device}]} if device is not None else {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "e2e.gpuaas.io",
            "allNodes": True,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            **devices,
            **spec,
        },
    }


def test_dra_gates_do_what_the_table_says(control_plane: ControlPlane) -> None:
    """A field behind a gate that is off is dropped on create; the table says where each is on."""
    kube, version = control_plane.kube, control_plane.version()
    assert kube.served("resource.k8s.io/v1", "ResourceClaim") is kubernetes.has_feature(
        "DynamicResourceAllocation", version
    )
    stored = kube.create(_slice("consumable", {"allowMultipleAllocations": True}), dry_run=True)
    kept = stored["spec"]["devices"][0].get("allowMultipleAllocations") is True
    assert kept is kubernetes.has_feature("DRAConsumableCapacity", version), (version, stored["spec"]["devices"])
    # A slice of shared counters only (a slice holds counters or devices, never both).
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    stored = kube.create(_slice("partitionable", None, sharedCounters=counters), dry_run=True)
    kept = bool(stored["spec"].get("sharedCounters"))
    assert kept is kubernetes.has_feature("DRAPartitionableDevices", version), (version, stored["spec"])
    dc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "e2e-extended"},
          "spec": {"extendedResourceName": "example.com/gpu"}}  # fmt: skip
    kept = "extendedResourceName" in kube.create(dc, dry_run=True)["spec"]
    assert kept is kubernetes.has_feature("DRAExtendedResource", version), version


def test_mutating_admission_policy_is_served_from_its_ga_minor(control_plane: ControlPlane) -> None:
    kube, version = control_plane.kube, control_plane.version()
    served = kube.served("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy")
    assert served is kubernetes.has_feature("MutatingAdmissionPolicy", version), version


# --------------------------------------------------------------------------------------------
# The table against the sources: feature gates, Kueue


def _module_dir(module: str, version: str) -> Path:
    """A module's source in the Go module cache (``go env GOMODCACHE``), where the e2e build put it."""
    cache = subprocess.run(["go", "env", "GOMODCACHE"], env=toolchain.go_env(), capture_output=True, text=True)
    escaped = re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)  # the module cache's case encoding
    d = Path(cache.stdout.strip()) / f"{escaped}@{version}"
    assert d.is_dir(), f"{module}@{version} is expected in the Go module cache at {d}; `make e2e-tools` downloads it"
    return d


_SPEC = re.compile(
    r'Version: version\.MustParse\("(\d+)\.(\d+)"\), Default: (true|false), PreRelease: featuregate\.(\w+)'
)


def _gate_specs(source: str, gate: str) -> list[tuple[kubernetes.Minor, str, bool]] | None:
    m = re.search(rf"^\t{gate}: \{{\n(.*?)^\t\}},", source, re.M | re.S)
    if m is None:
        return None
    return [((int(a), int(b)), stage, on == "true") for a, b, on, stage in _SPEC.findall(m.group(1))]


def test_the_feature_table_is_the_servers_own(control_plane: ControlPlane) -> None:
    tag = toolchain.pinned_version(toolchain.controlplane())
    minor = kubernetes.minor_of(tag)
    assert minor == _minor(control_plane), (tag, control_plane.version())
    sources = [
        (_module_dir("k8s.io/kubernetes", tag) / "pkg/features/kube_features.go").read_text(),
        (_module_dir("k8s.io/apiserver", "v0" + tag[2:]) / "pkg/features/kube_features.go").read_text(),
    ]
    for name, feature in kubernetes.FEATURES.items():
        found = next((s for src in sources if (s := _gate_specs(src, name)) is not None), None)
        assert found is not None, f"{name} is not a gate of {tag}"
        ours = [(m, stage, on) for m, stage, on in feature.stages if m <= minor]
        assert found == ours, (name, tag, found)


def test_kueue_range_is_what_kueue_says() -> None:
    kueue = toolchain.TOOLSETS["kueue"]
    d = _module_dir("sigs.k8s.io/kueue", toolchain.pinned_version(kueue))
    floor = re.search(r"Requires Kubernetes (\d+)\.(\d+) or newer", (d / "README.md").read_text())
    assert floor is not None and (int(floor.group(1)), int(floor.group(2))) == kubernetes.KUEUE_MIN_KUBERNETES
    tested = re.search(r"^E2E_K8S_VERSIONS \?= (.*)$", (d / "hack/make/test.mk").read_text(), re.M)
    assert tested is not None
    assert tuple(kubernetes.minor_of(v) for v in tested.group(1).split()) == kubernetes.KUEUE_TESTED
    api = re.search(r"^\tk8s\.io/api (v\S+)$", (d / "go.mod").read_text(), re.M)
    assert api is not None and api.group(1) == "v0.36.2", (
        "kubernetes.py's docstring names the k8s.io/api Kueue is built on"
    )
