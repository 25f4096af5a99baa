"""HAMi, the third GPU sharing mode: facts every area reads, and the quota arithmetic, no Pulumi.

HAMi (Project-HAMi/HAMi v2.10.0; facts with sources in ../shared/reference/hami.md) splits a GPU
into slices of a chosen memory size and SM share, per pod. Its device plugin advertises each GPU
``splitCount`` times; its scheduler, one pod running an upstream kube-scheduler with HAMi's extender
(filter and bind, ``schedulerName: hami-scheduler``), books memory and cores per card; its webhook
points the pods that ask for HAMi resources at that scheduler; HAMi-core, preloaded into the
container (``/etc/ld.so.preload``), enforces the limits by intercepting CUDA calls. The limits are
software inside the container, not a boundary between mutually hostile tenants: MIG is.

**Names.** gpuaas renames HAMi's resources through the chart (:mod:`components.model.resources`
``HAMI_*``) so a slice (``nvidia.com/vgpu``) is never a whole GPU (``nvidia.com/gpu``).

**Quotas, two enforcers.** A team's ``quota.hami`` renders as:

* ``requests.nvidia.com/vgpu`` — slices. The Kubernetes quota controller enforces extended resources
  as ``requests.<name>`` only (kubernetes pkg/quota/v1/evaluator/core/pods.go
  ``isExtendedResourceNameForQuota``); HAMi does not enforce a slice count at all.
* ``limits.nvidia.com/vgpu-memory`` / ``limits.nvidia.com/vgpu-cores`` — what HAMi's own quota reads
  (pkg/device/quota.go: ``limits.`` keys, memory and cores only) and enforces in its webhook and
  extender filter, counting each container's memory and cores times its slices. The Kubernetes
  quota controller ignores these keys.
* ``requests.nvidia.com/vgpu-memory`` / ``requests.nvidia.com/vgpu-cores`` with the same numbers: the
  Kubernetes quota controller counts them per container without multiplying by slices (HAMi
  #1393), so this cap is never stricter than HAMi's; it holds while HAMi's in-memory quota is
  empty (a restarted scheduler before its informer synced admits everything: ``FitQuota`` returns
  true for a namespace it has no entry for).
* ``requests.nvidia.com/vgpu-memory-percentage: 0``: a share of "whatever card it lands on" cannot
  be counted in MiB by the quota controller or Kueue; pods state memory in MiB.

With elastic quotas Kueue counts the same numbers from the pod templates, memory and cores
multiplied by the pod's slices (:func:`kueue_transformations`; Kueue v0.19.2
``ResourceTransformation.multiplyBy``), before HAMi's webhook sees the pod. For a pod whose GPU
containers all ask the same slice count that is HAMi's count exactly; for one whose containers
differ it is more (Kueue multiplies pod totals), the safe side.
"""

from __future__ import annotations

from typing import Any, Final

from components.model import elastic, resources
from components.model.capacity import mib, sharing_groups
from components.model.config import StackConfig
from components.model.sharing import Hami
from components.model.teams import Team

#: The namespace and Helm release of HAMi; a contract (renaming either reinstalls HAMi).
NAMESPACE: Final = "hami-system"
RELEASE: Final = "hami"
#: HAMi's scheduler name (chart ``schedulerName``), what HAMi pods must name.
SCHEDULER_NAME: Final = "hami-scheduler"
#: The chart's names for release ``hami`` (templates/_helpers.tpl: the release name contains the
#: chart name, so the full name is ``hami``): the scheduler's ServiceAccount and Deployment.
SCHEDULER_SERVICE_ACCOUNT: Final = "hami-scheduler"

#: Where HAMi keeps HAMi-core and its per-container accounting on the node: ``devicePlugin.libPath``
#: and ``global.gpuHookPath`` + ``/vgpu`` (both ``/usr/local/vgpu`` in the chart), and the lock
#: directory the device plugin mounts into every slice (pkg/device-plugin/nvidiadevice/nvinternal/
#: plugin/server.go ``Allocate``: ``/tmp/vgpulock``). A pod that mounts one of them, or a folder
#: above one, can replace the library or rewrite another container's usage.
GPU_HOOK_PATH: Final = "/usr/local"
LIB_PATH: Final = "/usr/local/vgpu"
LOCK_PATH: Final = "/tmp/vgpulock"
HOST_PATHS: Final = (LIB_PATH, LOCK_PATH)

#: Environment a container of a HAMi pod may not set (HAMi-core reads these; the container's own
#: value wins over the device plugin's): ``CUDA_DISABLE_CONTROL=true`` skips the ld.so.preload mount
#: (server.go), ``LD_PRELOAD`` loads a library before or instead of HAMi-core, ``CUDA_DEVICE_*`` are
#: the limits themselves (``CUDA_DEVICE_MEMORY_LIMIT_<i>``, ``CUDA_DEVICE_SM_LIMIT``, the shared
#: cache file), ``CUDA_OVERSUBSCRIBE`` turns on spilling beyond the limit (set by HAMi only for a
#: memoryScaling above 1, which gpuaas does not offer), ``NVIDIA_VISIBLE_DEVICES`` names the GPUs the
#: NVIDIA runtime gives the container (HAMi's device plugin sets it to the container's slices).
FORBIDDEN_ENV: Final = ("CUDA_DISABLE_CONTROL", "LD_PRELOAD", "CUDA_OVERSUBSCRIBE", "NVIDIA_VISIBLE_DEVICES")
FORBIDDEN_ENV_PREFIXES: Final = ("CUDA_DEVICE_",)
#: HAMi-core's SM policy switch (pkg/util/types.go ``CoreLimitSwitch``): HAMi's webhook appends it with
#: the cluster's policy when that is not ``default``; any other value is the container's own escape.
CORE_POLICY_ENV: Final = "GPU_CORE_UTILIZATION_POLICY"

#: The ``hami.io/*`` pod annotations users set (pkg/util/types.go: the node and GPU scheduling
#: policies and the scoring weights). Every other ``hami.io/`` annotation is HAMi's own bookkeeping —
#: ``hami.io/vgpu-devices-to-allocate``, ``-allocated``, ``hami.io/vgpu-node``, ``hami.io/bind-phase``,
#: ... — which a pod could forge until HAMi #3042 (after v2.10.0).
USER_ANNOTATIONS: Final = (
    "hami.io/node-scheduler-policy",
    "hami.io/gpu-scheduler-policy",
    "hami.io/device-scoring-weights",
)
ANNOTATION_PREFIX: Final = "hami.io/"
#: The label that makes HAMi's webhook skip a pod or namespace (its objectSelector and namespaceSelector).
WEBHOOK_IGNORE_LABEL: Final = "hami.io/webhook"

#: HAMi's DRA driver needs DRAConsumableCapacity (KEP-5075: several claims on one device), alpha
#: and off in 1.34 and 1.35, beta and on by default from 1.36 (hami.md "DRA").
#: TODO(versions): read this from the Kubernetes version table once branch ``versions`` lands.
DRA_CONSUMABLE_CAPACITY_DEFAULT_ON: Final = (1, 36)


def hami_groups(cfg: StackConfig) -> list[tuple[str, str, Hami, str]]:
    """``(config path, group name, HAMi settings, gpu model)`` of every node group / GPU pool with ``hami``."""
    return [(w, name, s.hami, model) for w, name, s, model in sharing_groups(cfg) if s.hami is not None]


def uses_hami(cfg: StackConfig) -> bool:
    """Whether HAMi's device plugin and scheduler are deployed: a group has ``hami`` with its device plugin."""
    return any(h.driver == "devicePlugin" for _w, _n, h, _m in hami_groups(cfg))


def settings(cfg: StackConfig) -> Hami | None:
    """The cluster's HAMi settings: the first HAMi group's (the rules make every group agree)."""
    groups = [h for _w, _n, h, _m in hami_groups(cfg) if h.driver == "devicePlugin"]
    return groups[0] if groups else None


def team_uses_hami(team: Team) -> bool:
    """A team with HAMi quota: its namespace is in HAMi's webhook's sight."""
    q = team.quota.hami
    return bool(q.gpus or q.cores or mib(q.memory))


def team_may_use_hami(cfg: StackConfig, team: Team) -> bool:
    """A team with HAMi quota, or with elastic quotas one that may borrow HAMi slices."""
    if team_uses_hami(team):
        return True
    if not cfg.queues.elastic:
        return False
    return elastic.quota_ceilings(cfg, team).get(f"requests.{resources.HAMI_GPU}", "0") != "0"


def namespace_labels(cfg: StackConfig, team: Team) -> dict[str, str]:
    """``gpuaas.io/hami: "true"`` on the namespace of a team that may use HAMi slices, where HAMi runs.

    HAMi's webhook sees those namespaces only (its ``namespaceSelector``); teams cannot write it.
    """
    return {resources.HAMI_LABEL: "true"} if uses_hami(cfg) and team_may_use_hami(cfg, team) else {}


#: HAMi's per-slice resources that Kueue multiplies by the pod's slices.
PER_SLICE: Final = (resources.HAMI_MEMORY, resources.HAMI_CORES)


def kueue_transformations(cfg: StackConfig) -> list[dict[str, Any]]:
    """Kueue ``resources.transformations``: memory and cores per slice, times the pod's slices.

    ``Replace`` with an output of the same name: the workload then carries one number per resource,
    the one the ClusterQueue's nominal quota (the team's ``quota.hami``) is in.
    """
    if not uses_hami(cfg):
        return []
    return [
        {"input": r, "strategy": "Replace", "multiplyBy": resources.HAMI_GPU, "outputs": {r: "1"}} for r in PER_SLICE
    ]


def kueue_excluded_prefixes(cfg: StackConfig) -> list[str]:
    """Resources Kueue leaves out: HAMi's task priority (0 or 1 per container, nothing to count)."""
    return [resources.HAMI_PRIORITY] if uses_hami(cfg) else []


def quota_keys(hard: dict[str, str]) -> dict[str, str]:
    """HAMi's own ``limits.`` keys beside the ``requests.`` ones of the same per-slice resources.

    HAMi reads only ``limits.<memory>`` and ``limits.<cores>`` (see the module docstring); the
    quota controller only ``requests.``. Same numbers, two enforcers.
    """
    out = dict(hard)
    for r in PER_SLICE:
        if f"requests.{r}" in hard:
            out[f"limits.{r}"] = hard[f"requests.{r}"]
    return out
