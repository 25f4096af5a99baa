"""Rules of the DRA resource model (``gpuOperator.resourceModel: dra``), run by :func:`components.rules.check`.

Each refusal names the key to edit and says what upstream supports; the facts are in
:mod:`components.model.dra`'s docstring with their sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from components.model import dra, kubernetes, versions
from components.model.capacity import gpus_per_node, node_counts, sharing_groups
from components.model.catalog import GPU_MODELS
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.platform import AksPlatform

_VERSION = re.compile(r"^v?([0-9]{1,9})\.([0-9]{1,9})(?:\.([0-9]{1,9}))?$")  # bounded: read as ints


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``1.34``, ``1.34.4`` or ``v26.7.0`` as a tuple; ``None`` for anything else (``1.34.4-gke.1``)."""
    m = _VERSION.match(text.strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _release(tag: str) -> tuple[int, ...]:
    """``v26.7.0`` (or ``v26.7.0-rc.1``, compared by its release numbers) as a tuple."""
    return tuple(int(n) for n in re.findall(r"[0-9]+", tag.split("-", 1)[0])[:3])


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(str(n) for n in v)


def dra_issues(cfg: StackConfig) -> Iterator[Issue]:
    """Every problem of a DRA stack (and a malformed declared version on any stack)."""
    p = cfg.platform
    key = "gpuaas:platform.kubernetesVersion"
    declared = p.kubernetes_version
    parsed = parse_version(declared) if declared is not None else None
    if declared is not None and parsed is None:
        yield Issue(key, f"{declared!r} is not a Kubernetes version; write MAJOR.MINOR[.PATCH], e.g. 1.34.4")
    if cfg.gpu_operator.resource_model != "dra":
        if cfg.gpu_operator.dra.dynamic_mig:
            yield Issue(
                "gpuaas:gpuOperator.dra.dynamicMig", "is an option of resourceModel dra (the DRA driver's DynamicMIG)"
            )
        return
    need = versions.DRA_MIN_KUBERNETES
    # An undeclared on-prem version is refused by components/rules/versions.py, for every stack.
    if parsed is not None and parsed[:2] < need:
        upgrade = "set a newer AKS version" if isinstance(p, AksPlatform) else "upgrade the cluster first"
        yield Issue(
            key,
            f"{declared}: resourceModel dra needs Kubernetes {_fmt(need)} or newer (DynamicResourceAllocation is GA "
            f"with resource.k8s.io/v1 from {_fmt(need)}); {upgrade}, or use resourceModel devicePlugin",
        )

    chart = cfg.versions.gpu_operator_chart  # a pinned vX.Y.Z[-pre] (types.ChartVersion)
    first = versions.GPU_OPERATOR_FIRST_GPUCLUSTER
    if _release(chart) < _release(first):
        yield Issue(
            "gpuaas:versions.gpuOperatorChart",
            f"{chart}: the GPUCluster CR (the DRA resource model) first ships in GPU Operator {first}",
        )

    if cfg.gpu_operator.mig_strategy == "single":
        yield Issue(
            "gpuaas:gpuOperator.migStrategy",
            "single: under DRA a MIG device is always a mig.nvidia.com device, never nvidia.com/gpu; "
            "the strategy is a device-plugin setting (remove it or set mixed)",
        )
    for where, _name, sharing, _model in sharing_groups(cfg):
        if sharing.time_slicing is not None:
            yield Issue(
                f"gpuaas:{where}.timeSlicing",
                "is not supported with resourceModel dra: the NVIDIA DRA driver (v0.5.0) shares a GPU only among "
                "the pods of one ResourceClaim; per-node replicas have no DRA equivalent and sharing across claims "
                "needs its alpha gates (TimeSlicingSettings, ConsumableShares). Give the group whole GPUs or MIG",
            )
    for i, team in enumerate(cfg.teams):
        if team.quota.time_sliced_gpus:
            yield Issue(
                f"gpuaas:teams[{i}].quota.timeSlicedGpus",
                f"{team.quota.time_sliced_gpus}: time-sliced GPUs are a device-plugin resource; under resourceModel "
                "dra quota whole GPUs (gpus) or MIG profiles (mig)",
            )
    yield from _cdi(cfg)
    if dra.dynamic_mig(cfg):
        yield from _dynamic_mig(cfg, parsed)


#: AKS node images whose containerd has CDI on by default: Ubuntu 24.04 images run containerd 2.0
#: (azure-aks-docs upgrade-os-version.md; ../shared/reference/pulumi-azure.md). 22.04 images run
#: containerd 1.7, where ``enable_cdi`` defaults to false and AKS offers no setting for it.
_CDI_BY_DEFAULT: Final = frozenset({"Ubuntu2404"})


def _cdi(cfg: StackConfig) -> Iterator[Issue]:
    """The NVIDIA DRA driver needs CDI in the nodes' container runtime: check what the config shows.

    The driver's kubelet plugin answers a claim with CDI device names, which the runtime must
    resolve (dra-driver-nvidia-gpu docs: CDI is a prerequisite; containerd 2.0 enables it by
    default, containerd 1.7 needs ``enable_cdi``). AKS: the pools' OS images decide it. On-prem the
    config cannot see the runtime: ``gpuOperator.dra.cdiEnabled`` says it was checked.
    """
    if cfg.gpu_operator.dra.cdi_enabled:
        return
    aks = cfg.aks
    if aks is not None:
        for i, pool in enumerate(aks.gpu_pools):
            if pool.os_sku not in _CDI_BY_DEFAULT:
                yield Issue(
                    f"gpuaas:platform.gpuPools[{i}].osSku",
                    f"{pool.os_sku}: its nodes run containerd 1.7, where CDI (which the NVIDIA DRA driver hands "
                    "devices through) is off unless enable_cdi is set; use Ubuntu2404 (containerd 2.0, CDI on), or set "
                    "gpuaas:gpuOperator.dra.cdiEnabled: true once the nodes have it on",
                )
        return
    yield Issue(
        "gpuaas:gpuOperator.dra.cdiEnabled",
        "false: the NVIDIA DRA driver hands devices to containers through CDI, which the nodes' container runtime "
        "must have on (containerd 2.0 and CRI-O: on by default; containerd 1.7: enable_cdi = true and "
        "cdi_spec_dirs in the CRI plugin config) and a GPUCluster does not configure; check the nodes, then set "
        "it true",
    )


#: DRAPartitionableDevices, which dynamic MIG's ResourceSlices need, is on by default from 1.36.
_PARTITIONABLE_BY_DEFAULT = kubernetes.feature_since("DRAPartitionableDevices") or (1, 36)


def _dynamic_mig(cfg: StackConfig, k8s: tuple[int, int, int] | None) -> Iterator[Issue]:
    """DynamicMIG (alpha): the driver partitions on demand, so no static layouts; slices as capacity.

    dra-driver-nvidia-gpu docs, guides/gpu-allocation/mig.md: "MIG partitions the driver did not
    create are destroyed when the GPU kubelet plugin starts", and "On Kubernetes v1.34–v1.35, you
    must also enable the DRAPartitionableDevices feature gate on the kube-apiserver and
    kube-scheduler".
    """
    opts = cfg.gpu_operator.dra
    if k8s is not None and k8s[:2] < _PARTITIONABLE_BY_DEFAULT and not opts.partitionable_devices_enabled:
        yield Issue(
            "gpuaas:gpuOperator.dra.partitionableDevicesEnabled",
            f"false: dynamic MIG on Kubernetes {_fmt(k8s[:2])} needs the DRAPartitionableDevices feature gate on the "
            "kube-apiserver and kube-scheduler (alpha; default from 1.36). Enable it there, then set this true",
        )
    for where, _name, sharing, _model in sharing_groups(cfg):
        if sharing.mig.layout not in (None, "all-disabled") or sharing.mig.profiles:
            key = "layout" if sharing.mig.layout is not None else "profiles"
            yield Issue(
                f"gpuaas:{where}.mig.{key}",
                "a static MIG layout with gpuOperator.dra.dynamicMig: the driver destroys partitions it did not "
                "create when it starts; leave the layout out (the driver partitions on demand) or turn dynamicMig off",
            )
    profiles = dra.dynamic_mig_profiles(cfg)
    if not profiles:
        yield Issue("gpuaas:gpuOperator.dra.dynamicMig", "no node group has a MIG-capable GPU")
        return
    # Whole-GPU and MIG claims draw on the same GPUs: both are counted in compute slices, a whole
    # GPU as the most slices a fleet GPU has (conservative on a mixed fleet).
    counts = node_counts(cfg)
    supply, per_gpu = 0, 0
    for _where, name, _sharing, model in sharing_groups(cfg):
        gpu = GPU_MODELS.get(model)
        if gpu is not None and gpu.profiles:
            supply += counts.get(name, 0) * gpus_per_node(cfg, name) * gpu.compute_slices
            per_gpu = max(per_gpu, gpu.compute_slices)
    demand: list[tuple[int, int]] = []
    for i, team in enumerate(cfg.teams):
        slices = team.quota.gpus * per_gpu
        for profile, n in team.quota.mig.items():
            if profile not in profiles:
                yield Issue(
                    f'gpuaas:teams[{i}].quota.mig["{profile}"]',
                    f"no node group's GPU has MIG profile {profile!r}; offered: {', '.join(profiles)}",
                )
            else:
                slices += n * profiles[profile].compute
        if slices:
            demand.append((i, slices))
    total = sum(n for _, n in demand)
    if total > supply and not cfg.quota_policy.allow_oversubscription:
        where = f"teams[{demand[0][0]}].quota" if len(demand) == 1 else "teams[*].quota"
        who = ", ".join(f"{cfg.teams[i].name} {n}" for i, n in demand)
        yield Issue(
            f"gpuaas:{where}",
            f"with dynamic MIG, GPU and MIG quotas take {total} compute slices ({who}; a whole GPU is {per_gpu}); "
            f"the MIG-capable GPUs have {supply}. Lower the quotas or set "
            "gpuaas:quotaPolicy.allowOversubscription: true",
        )


def replaced_by_dra(cfg: StackConfig, issue: Issue) -> bool:
    """A static-layout MIG capacity issue of :mod:`components.rules`, which dynamic MIG replaces by
    the compute-slice check above (no layout offers a profile; the driver cuts one on demand)."""
    return dra.dynamic_mig(cfg) and ".quota.mig[" in issue.path
