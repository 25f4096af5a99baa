"""The DRA resource model: rules, rendered objects against upstream, quotas, the claim guard's CEL.

The DRA variant stack is ``tests/stacks/onprem-dra.yaml`` (a ``--stack-file`` of the onprem
stack, so the tests that iterate over ``Pulumi.*.yaml`` are unaffected); it is planned here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from hypothesis import given, settings
from hypothesis import strategies as st

from components import platform_args
from components.dra import claims
from components.dra import tenancy as dra_tenancy
from components.guards import resource_model
from components.loader import gpuaas_section, parse_config
from components.model import dra, resources
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.operators import gpu_cluster
from components.operators.gpu_operator import gpu_operator_values
from components.plan.offline import ROOT, run_program, stack_config
from components.plan.writer import write_plan
from components.tenancy import quotas
from tests import kueue_objects, tenancy_objects
from tests.conftest import raw_stack, stack_path
from tests.schema_helpers import GPU_OPERATOR_READ_NOT_LISTED, assert_value_paths_exist, validate_against_crd
from tests.tenancy.test_admission_cel import Policy

DRA_STACK: Final = ROOT / "tests" / "stacks" / "onprem-dra.yaml"
GPU_OPERATOR: Final = ("gpu-operator", "v26.7.0")


def dra_raw() -> dict[str, Any]:
    return copy.deepcopy(gpuaas_section(stack_config("onprem", DRA_STACK)))


def dra_cfg() -> StackConfig:
    return parse_config(dra_raw())


def issues_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    return [str(i) for i in err.value.issues]


# --------------------------------------------------------------------------------------------
# Rules, table-driven: each refusal next to the allowed case it differs from


def _onprem_version(v: str | None) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        if v is None:
            raw["platform"].pop("kubernetesVersion", None)
        else:
            raw["platform"]["kubernetesVersion"] = v

    return edit


def _chart(v: str) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw.setdefault("versions", {}).__setitem__("gpuOperatorChart", v)


def _mig_strategy(v: str) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw["gpuOperator"].__setitem__("migStrategy", v)


def _time_slice_group(raw: dict[str, Any]) -> None:
    raw["platform"]["nodeGroups"].append(
        {"name": "h100-shared", "gpuModel": "H100-80GB", "timeSlicing": {"replicas": 2}}
    )


def _time_sliced_quota(raw: dict[str, Any]) -> None:
    raw["teams"][4]["quota"] = {"timeSlicedGpus": 4, "rdma": 8}
    _time_slice_group(raw)
    raw["platform"]["nodes"].append({"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-shared"})


REFUSED: Final[list[tuple[str, Callable[[dict[str, Any]], None], str, str]]] = [
    # (id, edit of the DRA stack, path, fragment of the reason)
    ("k8s-1.33", _onprem_version("1.33.5"), "gpuaas:platform.kubernetesVersion", "needs Kubernetes 1.34 or newer"),
    ("k8s-undeclared", _onprem_version(None), "gpuaas:platform.kubernetesVersion", "is required on-prem"),
    ("k8s-malformed", _onprem_version("one-thirty-four"), "gpuaas:platform.kubernetesVersion", "not a Kubernetes"),
    ("chart-before-gpucluster", _chart("v26.3.3"), "gpuaas:versions.gpuOperatorChart", "first ships in"),
    ("mig-single", _mig_strategy("single"), "gpuaas:gpuOperator.migStrategy", "always a mig.nvidia.com device"),
    ("time-sliced-group", _time_slice_group, "gpuaas:platform.nodeGroups[3].timeSlicing", "one ResourceClaim"),
    ("time-sliced-quota", _time_sliced_quota, "gpuaas:teams[4].quota.timeSlicedGpus", "device-plugin resource"),
]

ALLOWED: Final[list[tuple[str, Callable[[dict[str, Any]], None]]]] = [
    ("the-variant-stack", lambda raw: None),
    ("k8s-1.35", _onprem_version("1.35")),
    ("k8s-v1.35.1", _onprem_version("v1.35.1")),
    ("chart-newer", _chart("v26.10.0")),
    ("chart-patch", _chart("v26.7.1")),
    ("mig-mixed", _mig_strategy("mixed")),
]


@pytest.mark.parametrize(("edit", "path", "reason"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_dra_rule_refuses(edit: Callable[[dict[str, Any]], None], path: str, reason: str) -> None:
    raw = dra_raw()
    edit(raw)
    found = [i for i in issues_of(raw) if i.startswith(path + ":")]
    assert found, f"no issue at {path}: {issues_of(raw)}"
    assert any(reason in i for i in found), found


@pytest.mark.parametrize("edit", [c[1] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_dra_rule_allows(edit: Callable[[dict[str, Any]], None]) -> None:
    raw = dra_raw()
    edit(raw)
    assert dra.uses_dra(parse_config(raw))


@pytest.mark.parametrize("edit", [_time_slice_group, _time_sliced_quota, _mig_strategy("single"), _chart("v26.3.3")])
def test_what_dra_refuses_the_device_plugin_model_allows(edit: Callable[[dict[str, Any]], None]) -> None:
    raw = dra_raw()
    edit(raw)
    del raw["gpuOperator"]["resourceModel"]
    if raw["gpuOperator"].get("migStrategy") == "single":
        raw["teams"] = [t for t in raw["teams"] if "mig" not in t["quota"]]  # per-profile quotas need mixed
        raw["platform"]["nodeGroups"][0].pop("mig")  # and so does a mixed layout
    assert not dra.uses_dra(parse_config(raw))


def test_aks_needs_a_dra_capable_version() -> None:
    raw = raw_stack("aks")
    raw["gpuOperator"]["resourceModel"] = "dra"
    raw["platform"]["kubernetesVersion"] = "1.33.5"
    assert (
        "gpuaas:platform.kubernetesVersion: 1.33.5: resourceModel dra needs Kubernetes 1.34 or newer (Dynamic"
        "ResourceAllocation is GA with resource.k8s.io/v1 from 1.34); set a newer AKS version, or use resourceModel "
        "devicePlugin"
    ) in issues_of(raw)
    raw["platform"]["kubernetesVersion"] = "1.35.7"
    raw["gpuOperator"]["dra"] = {"cdiEnabled": True}
    assert dra.uses_dra(parse_config(raw))


def test_dra_needs_cdi_in_the_container_runtime() -> None:
    """Item 10: the DRA driver hands devices over as CDI names; what the config can show is checked."""
    raw = dra_raw()
    del raw["gpuOperator"]["dra"]
    assert [i for i in issues_of(raw) if "cdi" in i.lower()] == [
        "gpuaas:gpuOperator.dra.cdiEnabled: false: the NVIDIA DRA driver hands devices to containers through CDI, "
        "which the nodes' container runtime must have on (containerd 2.0 and CRI-O: on by default; containerd 1.7: "
        "enable_cdi = true and cdi_spec_dirs in the CRI plugin config) and a GPUCluster does not configure; check "
        "the nodes, then set it true"
    ]
    # AKS: the pools' OS images show it. Ubuntu 22.04 (containerd 1.7) is refused, 24.04 passes.
    aks = raw_stack("aks")
    aks["gpuOperator"]["resourceModel"] = "dra"
    aks["platform"]["kubernetesVersion"] = "1.35.7"
    assert [i.split(":")[1] for i in issues_of(aks)] == ["platform.gpuPools[0].osSku", "platform.gpuPools[1].osSku"]
    assert "Ubuntu2204: its nodes run containerd 1.7" in issues_of(aks)[0]
    for pool in [*aks["platform"]["gpuPools"], aks["platform"]["systemPool"]]:
        pool["osSku"] = "Ubuntu2404"  # one OS for the whole cluster (components/rules/versions.py)
    assert dra.uses_dra(parse_config(aks))
    # the device-plugin model never asks (the GPU Operator's toolkit configures the runtime)
    del raw["gpuOperator"]["resourceModel"]
    assert not dra.uses_dra(parse_config(raw))


def test_all_dra_problems_at_once() -> None:
    raw = dra_raw()
    for _id, edit, _path, _reason in REFUSED[:1] + REFUSED[3:]:
        edit(raw)
    paths = {i.split(": ", 1)[0] for i in issues_of(raw)}
    assert {c[2] for c in REFUSED[:1] + REFUSED[3:]} <= paths


# --------------------------------------------------------------------------------------------
# GPU Operator values and the GPUCluster, against the pinned chart and CRD


@pytest.fixture
def gpu_operator_dir(upstream: Path) -> Path:
    return upstream.joinpath(*GPU_OPERATOR)


@pytest.mark.parametrize("driver", [False, True])
def test_dra_values_exist_in_the_chart_and_never_deploy_a_cluster_policy(gpu_operator_dir: Path, driver: bool) -> None:
    raw = dra_raw()
    raw["gpuOperator"]["driverEnabled"] = driver
    values = gpu_operator_values(platform_args.gpu_operator(parse_config(raw)))
    assert_value_paths_exist(values, gpu_operator_dir / "values.yaml", GPU_OPERATOR_READ_NOT_LISTED)
    assert values["clusterPolicy"] == {"deployCR": False}
    assert values["gpuCluster"] == {"deployCR": False}  # gpuaas applies the GPUCluster itself
    # The chart refuses a GPUCluster with an operator driver but no NVIDIADriver CRD (validations.yaml).
    assert values["driver"].get("nvidiaDriverCRD", {}).get("enabled", False) is driver


def test_device_plugin_values_unchanged_by_the_model_field(cfg_of: Callable[[str], StackConfig]) -> None:
    values = gpu_operator_values(platform_args.gpu_operator(cfg_of("onprem")))
    assert "clusterPolicy" not in values and "gpuCluster" not in values
    assert values["devicePlugin"]["config"]["name"] and values["migManager"]["config"]["name"]


GPU_CLUSTER_SNAPSHOT: Final = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "GPUCluster",
    "metadata": {"name": "gpu-cluster", "labels": {"app.kubernetes.io/part-of": "gpuaas"}},
    "spec": {
        "draDriver": {
            "repository": "nvcr.io/nvidia",
            "image": "dra-driver-nvidia-gpu",
            "version": "v0.5.0",
            "computeDomains": {"enabled": False},
        },
        "hostPaths": {"driverInstallDir": "/"},
        "daemonsets": {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    },
}


def test_gpu_cluster_snapshot() -> None:
    assert (
        gpu_cluster.gpu_cluster(dra_cfg().versions, dra_cfg().gpu_operator.dra.dynamic_mig, False)
        == GPU_CLUSTER_SNAPSHOT
    )
    custom = dra_raw()
    custom["versions"] = {"draDriverRepository": "mirror.example.com/nvidia", "draDriver": "v0.5.1"}
    got = gpu_cluster.gpu_cluster(
        parse_config(custom).versions, parse_config(custom).gpu_operator.dra.dynamic_mig, True
    )
    assert got["spec"]["draDriver"]["repository"] == "mirror.example.com/nvidia"
    assert got["spec"]["draDriver"]["version"] == "v0.5.1"
    assert got["spec"]["hostPaths"] == {"driverInstallDir": "/run/nvidia/driver"}


@pytest.mark.parametrize("driver", [False, True])
def test_gpu_cluster_is_valid_for_its_crd(gpu_operator_dir: Path, driver: bool) -> None:
    validate_against_crd(
        gpu_cluster.gpu_cluster(dra_cfg().versions, dra_cfg().gpu_operator.dra.dynamic_mig, driver),
        gpu_operator_dir / "crds" / "nvidia.com_gpuclusters.yaml",
    )


def test_gpu_cluster_crd_check_refuses_unknown_fields(gpu_operator_dir: Path) -> None:
    """The check can fail: a field the CRD lacks (``migManager``: GPUCluster has none) is refused."""
    bad = copy.deepcopy(GPU_CLUSTER_SNAPSHOT)
    bad["spec"]["migManager"] = {"enabled": True}
    with pytest.raises(AssertionError, match="migManager"):
        validate_against_crd(bad, gpu_operator_dir / "crds" / "nvidia.com_gpuclusters.yaml")


def test_gpu_cluster_singleton_name_is_the_crds_rule(gpu_operator_dir: Path) -> None:
    crd = yaml.safe_load((gpu_operator_dir / "crds" / "nvidia.com_gpuclusters.yaml").read_text())
    rules = [r["rule"] for r in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]]
    assert rules == [f"self.metadata.name == '{gpu_cluster.GPU_CLUSTER}'"]


# --------------------------------------------------------------------------------------------
# Device classes, claim templates, quotas


def test_mig_class_snapshot() -> None:
    assert claims.mig_device_class("1g.10gb+me") == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "mig-1g.10gb.me.gpuaas.io", "labels": {"app.kubernetes.io/part-of": "gpuaas"}},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type "
                        "== 'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb+me'"
                    }
                }
            ]
        },
    }


def test_claim_templates_follow_the_team_quota() -> None:
    cfg = dra_cfg()
    research = next(t for t in cfg.teams if t.name == "research")
    templates = claims.claim_templates(cfg, research)
    assert sorted(templates) == ["gpuaas-mig-1g.10gb", "gpuaas-mig-4g.40gb"]
    assert templates["gpuaas-mig-4g.40gb"] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": "gpuaas-mig-4g.40gb",
            "namespace": "research",
            "labels": {"app.kubernetes.io/part-of": "gpuaas"},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "mig",
                            "exactly": {
                                "deviceClassName": "mig-4g.40gb.gpuaas.io",
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            }
        },
    }
    vision = next(t for t in cfg.teams if t.name == "vision")
    assert sorted(claims.claim_templates(cfg, vision)) == ["gpuaas-gpu"]


def test_dra_quota_of_a_mig_team() -> None:
    cfg = dra_cfg()
    research = next(t for t in cfg.teams if t.name == "research")
    hard = quotas.quota_hard(cfg, research)
    gpu_keys = {k: v for k, v in hard.items() if "deviceclass" in k or "resourceclaims" in k or "nvidia.com/gpu" in k}
    assert gpu_keys == {
        "count/resourceclaims.resource.k8s.io": "16",
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "mig-1g.10gb.gpuaas.io.deviceclass.resource.k8s.io/devices": "12",
        "mig-4g.40gb.gpuaas.io.deviceclass.resource.k8s.io/devices": "4",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "requests.nvidia.com/gpu": "0",
        "requests.nvidia.com/gpu.shared": "0",
    }
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "0" and hard["requests.nvidia.com/sriov8004"] == "8"
    assert list(hard) == sorted(hard)


_PROFILES: Final = ("1g.10gb", "4g.40gb")


@settings(max_examples=60, deadline=None)
@given(
    gpus=st.integers(0, 32),
    mig=st.dictionaries(st.sampled_from(_PROFILES), st.integers(0, 8)),
    rdma=st.integers(0, 16),
    cpu=st.sampled_from(["8", "64", "500m"]),
)
def test_one_quota_renders_to_matching_device_plugin_and_dra_quotas(
    gpus: int, mig: dict[str, int], rdma: int, cpu: str
) -> None:
    """Every GPU key of the device-plugin quota has its DRA twin with the same count; the rest is identical."""
    raw = dra_raw()
    raw["teams"] = [raw["teams"][0]]
    raw["teams"][0]["quota"] = {"gpus": gpus, "mig": mig, "rdma": rdma, "cpu": cpu}
    raw["quotaPolicy"] = {"allowOversubscription": True}
    as_dra = parse_config(raw)
    del raw["gpuOperator"]["resourceModel"]
    as_dp = parse_config(raw)
    team_dra, team_dp = as_dra.teams[0], as_dp.teams[0]
    dp, drq = quotas.quota_hard(as_dp, team_dp), quotas.quota_hard(as_dra, team_dra)
    devices = 0
    for key, value in dp.items():
        res = key.removeprefix("requests.")
        cls = dra.device_class_for(res) if key.startswith("requests.") else None
        if cls is not None:
            assert drq[dra.device_quota_key(cls)] == value, key
            assert drq[key] == "0", f"{key}: nothing advertises GPU extended resources under DRA"
            devices += int(value)
        elif res == resources.GPU_SHARED:
            assert drq[key] == "0"
        else:
            assert drq[key] == value, key
    assert drq[dra.CLAIMS_QUOTA] == str(devices) == str(gpus + sum(mig.values()))
    dra_only = set(drq) - set(dp)
    assert dra_only == {dra.CLAIMS_QUOTA} | {dra.device_quota_key(c) for c in dra.device_classes(as_dra)}


def test_adding_a_team_leaves_other_teams_dra_objects_alone() -> None:
    raw = dra_raw()
    before = parse_config(raw)
    raw["teams"].append({"name": "newcomer", "quota": {"mig": {"1g.10gb": 2}}})
    after = parse_config(raw)
    for team in before.teams:
        twin = next(t for t in after.teams if t.name == team.name)
        assert quotas.quota_hard(before, team) == quotas.quota_hard(after, twin)
        assert claims.claim_templates(before, team) == claims.claim_templates(after, twin)
        assert tenancy_objects.namespace(before, team) == tenancy_objects.namespace(after, twin)


def test_namespace_labels_name_the_claimable_classes() -> None:
    cfg = dra_cfg()
    research = next(t for t in cfg.teams if t.name == "research")
    labels = tenancy_objects.namespace(cfg, research)["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith(dra.CLASS_LABEL_PREFIX)} == {
        "dra.gpuaas.io/mig-1g.10gb.gpuaas.io": "true",
        "dra.gpuaas.io/mig-4g.40gb.gpuaas.io": "true",
    }


def test_kueue_hook_maps_every_class_to_its_quota_resource() -> None:
    assert dra.kueue_device_class_mappings(dra_cfg()) == [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": "nvidia.com/mig-1g.10gb", "deviceClassNames": ["mig-1g.10gb.gpuaas.io"]},
        {"name": "nvidia.com/mig-4g.40gb", "deviceClassNames": ["mig-4g.40gb.gpuaas.io"]},
    ]
    assert dra.kueue_device_class_mappings(parse_config(raw_stack("onprem"))) == []


def test_gpus_as_claims_moves_the_gpu_request_to_claims() -> None:
    spec = {
        "containers": [
            {
                "name": "a",
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}},
            },
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
        ]
    }
    got = claims.gpus_as_claims(spec)
    assert got["containers"][0]["resources"] == {
        "requests": {"cpu": "1"},
        "limits": {},
        "claims": [{"name": "gpu-a-0"}, {"name": "gpu-a-1"}],
    }
    assert got["containers"][1] == spec["containers"][1]
    assert got["resourceClaims"] == [
        {"name": "gpu-a-0", "resourceClaimTemplateName": "gpuaas-gpu"},
        {"name": "gpu-a-1", "resourceClaimTemplateName": "gpuaas-gpu"},
    ]
    assert spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2", "input left alone"


# --------------------------------------------------------------------------------------------
# The claim guard's CEL, evaluated with cel-python (as test_admission_cel does for pods)


class ClaimPolicy(Policy):
    """A policy evaluated on a claim or template, with ``namespaceObject`` (Kubernetes VAP)."""

    def evaluate(self, obj: Mapping[str, Any], labels: Mapping[str, str] | None, resource: str) -> list[bool]:
        act: dict[str, Any] = {
            "object": json_to_cel(dict(obj)),
            "oldObject": None,
            "request": json_to_cel(
                {"namespace": "research", "operation": "CREATE", "resource": {"resource": resource}}
            ),
            "namespaceObject": json_to_cel(
                {"metadata": {"name": "research", **({"labels": dict(labels)} if labels is not None else {})}}
            ),
            "params": None,
        }
        values: dict[celtypes.StringType, Any] = {}
        for name, program in self.variables:
            act["variables"] = celtypes.MapType(values)
            values[celtypes.StringType(name)] = program.evaluate(act)
        act["variables"] = celtypes.MapType(values)
        out = []
        for program in self.validations:
            value = program.evaluate(act)
            assert isinstance(value, celtypes.BoolType), f"validation gave {value!r}"
            out.append(bool(value))
        return out


CLAIMS: Final = ClaimPolicy(dra_tenancy.claims_policy())
CHECKS: Final = tuple(name for name, _e, _m in dra_tenancy.CLAIM_CHECKS)
RESEARCH_LABELS: Final = {
    "gpuaas.io/team": "research",
    "dra.gpuaas.io/mig-1g.10gb.gpuaas.io": "true",
    "dra.gpuaas.io/mig-4g.40gb.gpuaas.io": "true",
}


def claim(*requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "research"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def exactly(cls: str, **extra: Any) -> dict[str, Any]:
    return {"name": "r", "exactly": {"deviceClassName": cls, **extra}}


def failing(obj: dict[str, Any], labels: Mapping[str, str] | None = RESEARCH_LABELS) -> list[str]:
    resource = "resourceclaimtemplates" if obj["kind"] == "ResourceClaimTemplate" else "resourceclaims"
    return [n for n, ok in zip(CHECKS, CLAIMS.evaluate(obj, labels, resource), strict=True) if not ok]


CLAIMS_ALLOWED: Final = [
    ("own-profile", claim(exactly("mig-1g.10gb.gpuaas.io"))),
    ("own-profile-count", claim(exactly("mig-4g.40gb.gpuaas.io", allocationMode="ExactCount", count=2))),
    ("own-profiles-first-available", claim({"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "mig-4g.40gb.gpuaas.io"},
        {"name": "small", "deviceClassName": "mig-1g.10gb.gpuaas.io", "count": 4},
    ]})),
    ("narrowing-selector", claim(exactly("mig-1g.10gb.gpuaas.io", selectors=[
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"}}
    ]))),
    ("admin-access-false", claim(exactly("mig-1g.10gb.gpuaas.io", adminAccess=False))),
    ("no-requests", {**claim(), "spec": {"devices": {}}}),
]  # fmt: skip

CLAIMS_REFUSED: Final = [
    ("whole-gpu-without-gpu-quota", claim(exactly("gpu.nvidia.com")), ["device-class"]),
    ("catch-all-mig", claim(exactly("mig.nvidia.com")), ["device-class"]),
    ("vfio-passthrough", claim(exactly("vfio.gpu.nvidia.com")), ["device-class"]),
    ("unknown-profile", claim(exactly("mig-7g.80gb.gpuaas.io")), ["device-class"]),
    ("one-bad-of-two", claim(exactly("mig-1g.10gb.gpuaas.io"), exactly("gpu.nvidia.com")), ["device-class"]),
    ("first-available-sneaks-a-class", claim({"name": "r", "firstAvailable": [
        {"name": "ok", "deviceClassName": "mig-1g.10gb.gpuaas.io"},
        {"name": "no", "deviceClassName": "gpu.nvidia.com"},
    ]}), ["device-class"]),
    ("admin-access", claim(exactly("mig-1g.10gb.gpuaas.io", adminAccess=True)), ["no-admin-access"]),
    ("allocation-mode-all", claim(exactly("mig-1g.10gb.gpuaas.io", allocationMode="All")), ["no-allocation-mode-all"]),
    ("all-in-first-available", claim({"name": "r", "firstAvailable": [
        {"name": "s", "deviceClassName": "mig-1g.10gb.gpuaas.io", "allocationMode": "All"}
    ]}), ["no-allocation-mode-all"]),
]  # fmt: skip


@pytest.mark.parametrize("obj", [c[1] for c in CLAIMS_ALLOWED], ids=[c[0] for c in CLAIMS_ALLOWED])
def test_claim_guard_allows(obj: dict[str, Any]) -> None:
    assert failing(obj) == []


@pytest.mark.parametrize(("obj", "checks"), [c[1:] for c in CLAIMS_REFUSED], ids=[c[0] for c in CLAIMS_REFUSED])
def test_claim_guard_refuses(obj: dict[str, Any], checks: list[str]) -> None:
    assert failing(obj) == checks


def test_claim_guard_reads_templates_through_spec_spec() -> None:
    cfg = dra_cfg()
    research = next(t for t in cfg.teams if t.name == "research")
    for template in claims.claim_templates(cfg, research).values():
        assert failing(template) == [], "gpuaas's own templates pass the guard"
    vision = next(t for t in cfg.teams if t.name == "vision")
    gpu_template = claims.claim_templates(cfg, vision)["gpuaas-gpu"]
    assert failing(gpu_template) == ["device-class"], "research may not use vision's shape"
    assert failing(gpu_template, labels={"dra.gpuaas.io/gpu.nvidia.com": "true"}) == []


def test_claim_guard_refuses_everything_where_no_class_is_labelled() -> None:
    assert failing(claim(exactly("mig-1g.10gb.gpuaas.io")), labels=None) == ["device-class"]
    assert failing(claim(exactly("mig-1g.10gb.gpuaas.io")), labels={"dra.gpuaas.io/mig-1g.10gb.gpuaas.io": "no"}) == [
        "device-class"
    ]


AKS_SHARED: Final = ROOT / "tests" / "stacks" / "aks-elastic.yaml"
POOL: Final = ClaimPolicy(
    dra_tenancy.pool_policy(
        platform_args.dra(parse_config(gpuaas_section(stack_config("aks", AKS_SHARED)))).unowned_pools
    )
)


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [], **spec}}


@pytest.mark.parametrize(
    ("pod", "ok"),
    [
        (_pod(), True),
        (_pod(resourceClaims=[{"name": "g", "resourceClaimTemplateName": "gpuaas-gpu"}]), False),
        (
            _pod(
                resourceClaims=[{"name": "g", "resourceClaimTemplateName": "gpuaas-gpu"}],
                nodeSelector={"kubernetes.azure.com/agentpool": "ndh100a"},
            ),
            True,
        ),
        (
            _pod(
                resourceClaims=[{"name": "g", "resourceClaimTemplateName": "gpuaas-gpu"}],
                nodeSelector={"kubernetes.azure.com/agentpool": "ndh100b"},
            ),
            False,
        ),
    ],
    ids=["no-claims", "claims-no-pool", "claims-own-pool", "claims-other-pool"],
)
def test_aks_dra_pods_must_select_their_pool(pod: dict[str, Any], ok: bool) -> None:
    labels = {"gpuaas.io/team": "training", "gpuaas.io/node-pool": "ndh100a"}
    assert POOL.evaluate(pod, labels, "pods") == [ok]


@pytest.mark.parametrize(
    ("pool", "ok"), [(None, False), ("ndh100a", False), ("ndh100b", False), ("ndshared", True)], ids=str
)
def test_aks_dra_pods_of_a_team_without_a_partition_stay_off_other_teams_pools(pool: str | None, ok: bool) -> None:
    """Item 12: the claim pool guard now binds every team namespace; without a pool label the
    pools no team owns (ndshared in tests/stacks/aks-elastic.yaml) are the only ones allowed."""
    spec: dict[str, Any] = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "gpuaas-gpu"}]}
    if pool is not None:
        spec["nodeSelector"] = {"kubernetes.azure.com/agentpool": pool}
    assert POOL.evaluate(_pod(**spec), {"gpuaas.io/team": "interns"}, "pods") == [ok]
    assert POOL.evaluate(_pod(), {"gpuaas.io/team": "interns"}, "pods") == [True]
    assert dra_tenancy.pool_binding()["spec"]["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "gpuaas.io/team", "operator": "Exists"}]
    }


# --------------------------------------------------------------------------------------------
# The variant stack, planned


@pytest.fixture(scope="module")
def dra_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("dra-plan")
    _run, summary = write_plan("onprem", out, stack_file=DRA_STACK)
    return out / "onprem", summary


def test_variant_stack_plans_with_the_dra_model(dra_plan: tuple[Path, str]) -> None:
    plan, summary = dra_plan
    k8s = plan / "k8s"
    assert (k8s / "_cluster" / "GPUCluster-gpu-cluster.yaml").is_file()
    assert (k8s / "research" / "ResourceClaimTemplate-gpuaas-mig-1g.10gb.yaml").is_file()
    assert (k8s / "vision" / "ResourceClaimTemplate-gpuaas-gpu.yaml").is_file()
    assert not list(k8s.rglob("ConfigMap-gpuaas-time-slicing-config.yaml")), "no device plugin under DRA"
    helm = yaml.safe_load(next((plan / "helm").glob("gpu-operator-*.yaml")).read_text())
    assert helm["values"]["clusterPolicy"] == {"deployCR": False}
    assert "GPU resource model: dra" in summary
    assert "gpuaas-mig-1g.10gb (mig-1g.10gb.gpuaas.io) x12, gpuaas-mig-4g.40gb (mig-4g.40gb.gpuaas.io) x4" in summary


def test_variant_plan_is_byte_identical_across_runs(dra_plan: tuple[Path, str], tmp_path: Path) -> None:
    plan, _summary = dra_plan
    write_plan("onprem", tmp_path, stack_file=DRA_STACK)
    a = {p.relative_to(plan): p.read_bytes() for p in plan.rglob("*") if p.is_file()}
    b = {p.relative_to(tmp_path / "onprem"): p.read_bytes() for p in (tmp_path / "onprem").rglob("*") if p.is_file()}
    assert a == b


def test_device_plugin_stacks_have_no_dra_objects(stack: str, run_of: Callable[[str], Any]) -> None:
    kinds = {r.inputs.get("kind") for r in run_of(stack).records}
    assert not kinds & {"GPUCluster", "DeviceClass", "ResourceClaimTemplate"}
    cfg = parse_config(raw_stack(stack))
    for team in cfg.teams:
        assert not any(
            k.startswith(dra.CLASS_LABEL_PREFIX) for k in tenancy_objects.namespace(cfg, team)["metadata"]["labels"]
        )
        assert not any("deviceclass" in k for k in quotas.quota_hard(cfg, team))


# --------------------------------------------------------------------------------------------
# Day 2: a running stack keeps its resource model (GPUCluster is greenfield only)


@pytest.mark.parametrize(
    ("model", "last_layouts", "last_model", "refused"),
    [
        ("dra", None, None, False),  # first run: greenfield
        ("devicePlugin", None, None, False),
        ("dra", {"h100-full": "all-disabled"}, "dra", False),
        ("devicePlugin", {"h100-full": "all-disabled"}, None, False),
        ("dra", {"h100-full": "all-disabled"}, None, True),  # device plugin → DRA in place
        ("devicePlugin", {"h100-full": "all-disabled"}, "dra", True),  # and back
    ],
)
def test_model_switch_guard(model: str, last_layouts: Any, last_model: Any, refused: bool) -> None:
    raw = dra_raw()
    raw["gpuOperator"]["resourceModel"] = model
    issues = resource_model.model_switch_issues(parse_config(raw), last_layouts, last_model)
    assert [i.path for i in issues] == (["gpuaas:gpuOperator.resourceModel"] if refused else [])


def test_plan_stops_a_model_switch_against_the_last_outputs(tmp_path: Path) -> None:
    import pulumi

    _run, _summary = write_plan("onprem", tmp_path / "before", stack_file=stack_path("onprem"))
    with pytest.raises(pulumi.RunError, match="this stack's last run used devicePlugin"):
        write_plan("onprem", tmp_path / "after", stack_file=DRA_STACK, previous=tmp_path / "before/onprem/outputs.yaml")
    # Its allowed twin: the DRA stack against its own last run.
    write_plan("onprem", tmp_path / "dra", stack_file=DRA_STACK)
    outputs = yaml.safe_load((tmp_path / "dra/onprem/outputs.yaml").read_text())
    assert outputs[resource_model.MODEL_OUTPUT] == "dra"
    write_plan("onprem", tmp_path / "again", stack_file=DRA_STACK, previous=tmp_path / "dra/onprem/outputs.yaml")


# --------------------------------------------------------------------------------------------
# Dynamic MIG: the explicit alpha opt-in (driver DynamicMIG gate)


def dynamic_raw(**dra_opts: Any) -> dict[str, Any]:
    raw = dra_raw()
    raw["platform"]["kubernetesVersion"] = "1.35.4"  # DRAPartitionableDevices is off by default before 1.36
    for group in raw["platform"]["nodeGroups"]:
        group.pop("mig", None)  # the driver partitions on demand
    raw["gpuOperator"]["dra"] = {
        **raw["gpuOperator"]["dra"],
        "dynamicMig": True,
        "partitionableDevicesEnabled": True,
        **dra_opts,
    }
    return raw


DYNAMIC_REFUSED: Final = [
    # (id, edit of dynamic_raw(), path, fragment of the reason)
    ("static-layout", lambda r: r["platform"]["nodeGroups"][0].__setitem__("mig", {"layout": "all-1g.10gb"}),
     "gpuaas:platform.nodeGroups[0].mig.layout", "destroys partitions it did not create"),
    ("k8s-1.34-without-the-gate", lambda r: r["gpuOperator"]["dra"].pop("partitionableDevicesEnabled"),
     "gpuaas:gpuOperator.dra.partitionableDevicesEnabled", "DRAPartitionableDevices"),
    ("profile-not-on-the-gpu", lambda r: r["teams"][3]["quota"].__setitem__("mig", {"1g.12gb": 2}),
     'gpuaas:teams[3].quota.mig["1g.12gb"]', "no node group's GPU has MIG profile"),
    ("slices-oversubscribed", lambda r: r["teams"][4]["quota"].__setitem__("mig", {"7g.80gb": 40}),
     "gpuaas:teams[*].quota", "compute slices"),
    ("device-plugin-model", lambda r: r["gpuOperator"].pop("resourceModel"),
     "gpuaas:gpuOperator.dra.dynamicMig", "is an option of resourceModel dra"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "path", "reason"), [c[1:] for c in DYNAMIC_REFUSED], ids=[c[0] for c in DYNAMIC_REFUSED]
)
def test_dynamic_mig_refuses(edit: Callable[[dict[str, Any]], None], path: str, reason: str) -> None:
    raw = dynamic_raw()
    edit(raw)
    found = [i for i in issues_of(raw) if i.startswith(path + ":")]
    assert found and reason in found[0], issues_of(raw)


def test_dynamic_mig_allowed_and_rendered(upstream: Path) -> None:
    cfg = parse_config(dynamic_raw())
    assert dra.dynamic_mig(cfg)
    cluster = gpu_cluster.gpu_cluster(cfg.versions, cfg.gpu_operator.dra.dynamic_mig, False)
    assert cluster["spec"]["draDriver"]["featureGates"] == {"DynamicMIG": True}
    validate_against_crd(cluster, upstream.joinpath(*GPU_OPERATOR, "crds", "nvidia.com_gpuclusters.yaml"))
    # Every H100-80GB profile gets its class: the driver may cut any of them.
    assert dra.offered_mig_profiles(cfg) == [
        "1g.10gb",
        "1g.10gb+me",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    ]
    # From Kubernetes 1.36 the partitionable-devices gate is on by default: no acknowledgement.
    raw = dynamic_raw()
    raw["gpuOperator"]["dra"].pop("partitionableDevicesEnabled")
    raw["platform"]["kubernetesVersion"] = "1.36.0"
    assert dra.dynamic_mig(parse_config(raw))
    # Static MIG renders no feature gate.
    assert (
        "featureGates"
        not in gpu_cluster.gpu_cluster(dra_cfg().versions, dra_cfg().gpu_operator.dra.dynamic_mig, False)["spec"][
            "draDriver"
        ]
    )


def test_variant_stack_passes_the_policy_pack() -> None:
    from tests.test_policy import policy_resources, run_pack

    records = run_program("onprem", config=stack_config("onprem", DRA_STACK)).records
    assert any(r.inputs.get("kind") == "ResourceClaimTemplate" for r in records)
    assert run_pack(policy_resources(records)) == {}


# --------------------------------------------------------------------------------------------
# DRA with elastic quotas (Kueue): claims count against the same ClusterQueues


def test_with_elastic_quotas_kueue_maps_every_gpu_class_to_the_resource_the_queues_cover() -> None:
    from components.queueing.queues import kueue_configuration

    raw = dra_raw()
    raw["queues"] = {"elastic": True}
    cfg = parse_config(raw)
    mappings = kueue_configuration(platform_args.queues(cfg))["resources"]["deviceClassMappings"]
    mapped = {m["name"]: m["deviceClassNames"] for m in mappings}
    for cls in dra.device_classes(cfg):
        if cls in (dra.GPU_CLASS,) or cls.endswith(".gpuaas.io"):
            assert any(cls in names for names in mapped.values()), cls
    covered = {
        r
        for t in cfg.teams
        for g in kueue_objects.cluster_queue(cfg, t)["spec"]["resourceGroups"]
        for r in g["coveredResources"]
    }
    assert set(mapped) <= covered, "every mapped resource is one the ClusterQueues cover"
    # The device-plugin model has no claims to count: no mappings in its Kueue config.
    plugin_raw = raw_stack("onprem")
    plugin_raw["queues"] = {"elastic": True}
    plugin = platform_args.queues(parse_config(plugin_raw))
    assert "deviceClassMappings" not in kueue_configuration(plugin)["resources"]


def test_with_elastic_quotas_a_teams_device_quota_is_its_queue_ceiling() -> None:
    """Kueue admits a borrowed claim; the ResourceQuota must not refuse it (Kueue does not read quotas)."""
    raw = dra_raw()
    raw["queues"] = {"elastic": True}
    cfg = parse_config(raw)
    for team in cfg.teams:
        plugin = quotas.device_plugin_quota_hard(cfg, team)
        hard = quotas.quota_hard(cfg, team)
        for key, value in plugin.items():
            cls = dra.device_class_for(key.removeprefix("requests."))
            if key.startswith("requests.") and cls is not None:
                assert hard[dra.device_quota_key(cls)] == value, (team.name, cls)
                assert hard[key] == "0"
    # The allowed twin of "hard": without elasticity the device quota is the guarantee.
    hard_cfg = parse_config({**raw, "queues": {"elastic": False}})
    vision = next(t for t in hard_cfg.teams if t.quota.gpus)
    assert quotas.quota_hard(hard_cfg, vision)[dra.device_quota_key(dra.GPU_CLASS)] == str(vision.quota.gpus)
