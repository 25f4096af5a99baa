"""Rules of HAMi node groups (``hami`` beside ``mig`` and ``timeSlicing``) and of ``quota.hami``.

The facts are in :mod:`components.model.hami` and ../shared/reference/hami.md:

* a node is HAMi's or MIG's, never both (HAMi's scheduler ignores static ``nvidia.com/mig-*``
  resources, HAMi #2564), and HAMi's device plugin replaces NVIDIA's on its nodes, so it cannot be
  time-sliced by NVIDIA's as well;
* HAMi advises against its device-plugin mode and a DRA model in one cluster (HAMi blog "does
  Kubernetes DRA replace HAMi"), and its DRA driver needs ``DRAConsumableCapacity``, on by default
  from Kubernetes 1.36 only;
* its scheduler runs kube-scheduler at the cluster's exact version, so the version is declared;
* its split count, memory scaling and core policy are chart-wide values: one per cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.model import hami, resources
from components.model.capacity import mib, mig_counts, sharing_groups
from components.model.catalog import GPU_MODELS
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.sharing import GpuSharing
from components.rules.common import config_key
from components.rules.dra import parse_version

#: A version kube-scheduler images are tagged with (registry.k8s.io/kube-scheduler:v1.34.4).
_PATCH_VERSION = re.compile(r"^([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})$")  # bounded: read as ints
#: The config key of each HAMi resource in a quota or queue limit.
QUOTA_KEYS = {resources.HAMI_GPU: "hami.gpus", resources.HAMI_MEMORY: "hami.memory", resources.HAMI_CORES: "hami.cores"}


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(str(n) for n in v)


def _has_mig(sharing: GpuSharing, model: str) -> bool:
    if model not in GPU_MODELS:
        return sharing.mig.profiles is not None or sharing.mig.layout not in (None, "all-disabled")
    try:
        return bool(mig_counts(sharing, model))
    except ValueError:
        return True  # an invalid layout: the sharing rules report it; with HAMi it is MIG either way


def _groups(cfg: StackConfig) -> Iterator[Issue]:
    """HAMi beside MIG or time-slicing on one group; the DRA driver and the Kubernetes version."""
    groups = hami.hami_groups(cfg)
    if not groups:
        return
    version = _declared(cfg)
    plugin = [w for w, _n, h, _m in groups if h.driver == "devicePlugin"]
    for where, _name, sharing, model in sharing_groups(cfg):
        h = sharing.hami
        if h is None:
            continue
        if _has_mig(sharing, model):
            key = "layout" if sharing.mig.layout is not None else "profiles"
            yield Issue(
                config_key(where, "mig", key),
                "a MIG layout on a HAMi node group: a node is either HAMi's or MIG's (HAMi's scheduler does not "
                "schedule static MIG devices, HAMi #2564); put the MIG GPUs in a node group of their own",
            )
        if sharing.time_slicing is not None:
            yield Issue(
                config_key(where, "timeSlicing"),
                "time-slicing on a HAMi node group: HAMi's device plugin replaces NVIDIA's there, and HAMi's slices "
                "are its sharing; remove timeSlicing (or hami)",
            )
        if h.driver == "dra":
            yield from _dra_driver(cfg, where, bool(plugin))
        elif cfg.gpu_operator.resource_model == "dra":
            yield Issue(
                config_key(where, "hami"),
                "HAMi's device plugin with gpuOperator.resourceModel dra: HAMi advises against its device-plugin mode "
                "and a DRA model in one cluster (two allocators of the same GPUs); choose one",
            )
    if plugin:
        yield from _scheduler_version(cfg, version)
        yield from _one_setting(cfg)
        yield from _autoscaled_pools(cfg)


def _autoscaled_pools(cfg: StackConfig) -> Iterator[Issue]:
    """An AKS HAMi pool has a fixed size: the cluster autoscaler cannot tell whether a HAMi pod fits.

    It simulates the default scheduler on a template node; HAMi pods ask for memory and cores that
    no node advertises (HAMi's extender books them per card), so the template either never fits
    them (the pool never grows) or fits what the real nodes then cannot hold (it grows to maxCount).
    """
    if cfg.aks is None:
        return
    for i, pool in enumerate(cfg.aks.gpu_pools):
        if pool.hami is not None and pool.min_count != pool.max_count:
            yield Issue(
                config_key(f"platform.gpuPools[{i}]", "minCount"),
                f"{pool.min_count}, maxCount {pool.max_count}: a HAMi pool has a fixed size (minCount = maxCount); the "
                "cluster autoscaler simulates the default scheduler, and HAMi's memory and cores are booked by HAMi's "
                "extender, which it does not run",
            )


def _declared(cfg: StackConfig) -> tuple[int, int, int] | None:
    text = cfg.platform.kubernetes_version
    m = _PATCH_VERSION.match(text) if text is not None else None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _scheduler_version(cfg: StackConfig, version: tuple[int, int, int] | None) -> Iterator[Issue]:
    declared = cfg.platform.kubernetes_version
    if version is not None:
        return
    key = "gpuaas:platform.kubernetesVersion"
    why = (
        "HAMi's scheduler runs the cluster's own kube-scheduler version (registry.k8s.io/kube-scheduler:"
        "v<MAJOR.MINOR.PATCH>): a newer one than the API server is outside the version skew policy"
    )
    if declared is None:
        yield Issue(key, f"is required with a HAMi node group: {why}; declare it (kubectl version), e.g. 1.34.4")
    elif re.fullmatch(r"[0-9]+\.[0-9]+", declared):
        yield Issue(key, f"{declared}: with a HAMi node group declare the patch too, e.g. {declared}.4: {why}")
    # anything else malformed is reported by components/rules/dra.py


_SETTINGS = (("splitCount", "split_count"), ("memoryScaling", "memory_scaling"), ("corePolicy", "core_policy"))


def _one_setting(cfg: StackConfig) -> Iterator[Issue]:
    """Every HAMi group states the first one's split count, memory scaling and core policy."""
    groups = [(w, h) for w, _n, h, _m in hami.hami_groups(cfg) if h.driver == "devicePlugin"]
    first_where, first = groups[0]
    for where, h in groups[1:]:
        for key, field in _SETTINGS:
            mine, theirs = getattr(h, field), getattr(first, field)
            if mine != theirs:
                yield Issue(
                    config_key(where, "hami", key),
                    f"{mine!r}, but {first_where}.hami.{key} is {theirs!r}: HAMi's chart sets it once for the "
                    "cluster (its per-node overrides name nodes, which an AKS pool does not know ahead); use one value",
                )


def _dra_driver(cfg: StackConfig, where: str, plugin: bool) -> Iterator[Issue]:
    """HAMi's DRA driver (hami-dra-driver 0.1.0): refused below 1.36, and not offered by gpuaas above (a preview)."""
    key = config_key(where, "hami", "driver")
    need = hami.DRA_CONSUMABLE_CAPACITY_DEFAULT_ON
    declared = cfg.platform.kubernetes_version
    version = parse_version(declared) if declared is not None else None
    if plugin:
        yield Issue(
            key,
            "dra, while another HAMi node group uses HAMi's device plugin: HAMi advises against its device-plugin "
            "mode and its DRA mode in one cluster; give every HAMi group one driver",
        )
    if declared is not None and version is None:
        return  # a malformed version: components/rules/dra.py reports it
    if version is None:
        yield Issue(
            key,
            f"dra needs the cluster's Kubernetes version: declare gpuaas:platform.kubernetesVersion ({_fmt(need)} or "
            "newer)",
        )
    elif version is not None and version[:2] < need:
        yield Issue(
            key,
            f"dra on Kubernetes {_fmt(version[:2])}: HAMi's DRA driver shares a GPU between claims through "
            f"DRAConsumableCapacity (KEP-5075), alpha and off before {_fmt(need)}; use driver devicePlugin, or "
            f"upgrade to {_fmt(need)}",
        )
    else:
        yield Issue(
            key,
            "dra: HAMi's DRA driver (hami-dra-driver 0.1.0) is a preview gpuaas does not deploy yet; use driver "
            'devicePlugin (README, "HAMi\'s DRA driver (preview)", says how to try it by hand)',
        )


def _quotas(cfg: StackConfig) -> Iterator[Issue]:
    """A team's HAMi quota: slices with memory, cores a slice can hold, and HAMi somewhere to use it."""
    offered = hami.uses_hami(cfg)
    for i, t in enumerate(cfg.teams):
        q = t.quota.hami
        base = f"teams[{i}].quota.hami"
        memory = mib(q.memory)
        if not hami.team_uses_hami(t):
            continue
        if not offered:
            yield Issue(
                config_key(f"teams[{i}].quota", "hami"),
                "no node group or GPU pool has hami (with its device plugin): give one `hami: {}`, or remove the "
                "team's HAMi quota",
            )
            continue
        if q.gpus and not memory:
            yield Issue(
                config_key(base, "memory"),
                f"0, with {q.gpus} slices: every HAMi pod states each slice's memory (nvidia.com/vgpu-memory, MiB), "
                "so a quota of none admits no slice; give the memory of all slices together, e.g. "
                f"{q.gpus * 10}Gi for {q.gpus} slices of 10Gi",
            )
        if not q.gpus:
            yield Issue(
                config_key(base, "gpus"),
                "0, with HAMi memory or cores: every HAMi pod asks for slices (nvidia.com/vgpu); give a slice count",
            )
        if q.cores > q.gpus * 100:
            yield Issue(
                config_key(base, "cores"),
                f"{q.cores}: {q.gpus} slices hold at most {q.gpus * 100} (100 is one GPU's SMs; a slice sits on one "
                "GPU)",
            )


def check(cfg: StackConfig) -> Iterator[Issue]:
    """Every HAMi problem of the stack, each naming its key."""
    yield from _groups(cfg)
    yield from _quotas(cfg)
