"""GPU sharing of a node group or GPU pool: a MIG layout, time-slicing or HAMi (``mig``, ``timeSlicing``, ``hami``).

:class:`GpuSharing` is the base of :class:`components.model.platform.NodeGroup` and
:class:`components.model.platform.GpuPool`; what a layout offers is :mod:`components.model.capacity`'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    field_validator,
    model_validator,
)

from components.model.base import Model
from components.model.catalog import GPU_MODELS
from components.model.types import (
    PositiveInt,
)


class MigConfig(Model):
    """A MIG layout for every GPU of a node group: a named ``layout`` or explicit ``profiles``.

    Neither means ``all-disabled``. Named layouts: ``all-disabled``, ``all-balanced``,
    ``all-<profile>`` or ``<n>x<profile>`` terms joined by ``-`` (``1x4g.40gb-3x1g.10gb``).
    """

    layout: str | None = None
    """A named MIG layout: ``all-disabled``, ``all-balanced``, ``all-<profile>`` or ``<n>x<profile>`` terms joined
    by ``-`` (e.g. ``1x4g.40gb-3x1g.10gb``); not with ``profiles``."""
    profiles: dict[str, PositiveInt] | None = None
    """An explicit MIG layout: instances of each profile per GPU (e.g. ``{1g.10gb: 7}``); not with ``layout``.
    Neither set means ``all-disabled``."""
    reconfigure: bool = False
    """Acknowledges that changing this layout evicts every GPU pod on the group's nodes. Without
    it a run whose layout differs from the last run's stops (components/guards/mig.py)."""

    @model_validator(mode="after")
    def _one_of(self) -> MigConfig:
        if self.layout is not None and self.profiles is not None:
            raise ValueError("set either layout or profiles, not both")
        return self


#: The kubelet's default ``maxPods`` (kubelet config reference): the most pods one node runs.
MAX_TIME_SLICING_REPLICAS = 110


class TimeSlicing(Model):
    """Time-slicing: each GPU is advertised ``replicas`` times as ``nvidia.com/gpu.shared``."""

    replicas: int
    """How many times each GPU is advertised as ``nvidia.com/gpu.shared``, i.e. how many pods share one GPU: 1 to
    110 (the kubelet's default ``maxPods``)."""

    @field_validator("replicas")
    @classmethod
    def _at_least_one(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"time-slicing replicas must be at least 1 (got {v})")
        # Each replica is a schedulable nvidia.com/gpu.shared device, and one pod takes one: a
        # node runs at most 110 pods (the kubelet's default maxPods), so more replicas of one GPU
        # are devices no pod can ever be given, only inflated capacity that quotas are checked against.
        if v > MAX_TIME_SLICING_REPLICAS:
            raise ValueError(
                f"time-slicing replicas {v} exceed {MAX_TIME_SLICING_REPLICAS}: each replica is one pod's share of a "
                f"GPU and a node runs at most {MAX_TIME_SLICING_REPLICAS} pods (kubelet maxPods default)"
            )
        return v


class Hami(Model):
    """HAMi on a node group: each GPU is split into slices of chosen memory and SM share (``nvidia.com/vgpu``).

    HAMi's device plugin advertises every GPU ``splitCount`` times; a pod asks for slices and states
    each slice's memory (``nvidia.com/vgpu-memory``, MiB) and SM share (``nvidia.com/vgpu-cores``,
    percent), which HAMi-core enforces inside the container (components/model/hami.py). The three
    settings are HAMi's cluster-wide chart values, so every HAMi group of a stack states the same.
    """

    split_count: int = 10
    """Slices per GPU: at most this many pods share one card (``devicePlugin.deviceSplitCount``)."""
    memory_scaling: float = 1.0
    """The part of each GPU's memory HAMi hands out (``devicePlugin.deviceMemoryScaling``), 0 < s <= 1.
    Above 1 is HAMi's experimental oversubscription (memory spilled to the host), not offered."""
    core_policy: Literal["default", "force", "disable"] = "default"
    """HAMi-core's SM limit policy (``devices.nvidia.gpuCorePolicy``, which HAMi's webhook hands to the
    container as ``GPU_CORE_UTILIZATION_POLICY``; HAMi pkg/device/nvidia/device.go): ``default``
    (HAMi-core's own), ``force`` or ``disable`` (no SM limit: ``vgpu-cores`` is then counted, not enforced)."""
    driver: Literal["devicePlugin", "dra"] = "devicePlugin"
    """``devicePlugin`` (HAMi's device plugin and scheduler extender) or ``dra`` (HAMi's DRA driver,
    which needs Kubernetes 1.36: components/rules/hami.py)."""

    @field_validator("split_count")
    @classmethod
    def _split(cls, v: int) -> int:
        # One slice is one pod's, and a node runs at most 110 pods (the kubelet's default maxPods),
        # as for time-slicing replicas.
        if not 1 <= v <= MAX_TIME_SLICING_REPLICAS:
            raise ValueError(
                f"{v}: a GPU is split into 1 to {MAX_TIME_SLICING_REPLICAS} slices (each slice is one pod's, and a "
                f"node runs at most {MAX_TIME_SLICING_REPLICAS} pods)"
            )
        return v

    @field_validator("memory_scaling")
    @classmethod
    def _scaling(cls, v: float) -> float:
        if not 0 < v <= 1:
            raise ValueError(
                f"{v}: memoryScaling is the part of each GPU's memory HAMi hands out, more than 0 and at most 1; "
                "above 1 is HAMi's experimental memory oversubscription (device memory spilled to host memory), "
                "which gpuaas does not offer"
            )
        return v


class GpuSharing(Model):
    """Fields shared by on-prem node groups and AKS GPU pools."""

    mig: MigConfig = MigConfig()
    """The MIG layout of every GPU of the group or pool (default: MIG disabled)."""
    time_slicing: TimeSlicing | None = None
    """Time-slicing of the group's or pool's GPUs; unset: none. Not with a MIG layout nor with ``hami``."""
    hami: Hami | None = None
    """HAMi slicing of the group's or pool's GPUs (``nvidia.com/vgpu``); unset: none. Not with a MIG layout nor with
    ``timeSlicing``."""

    @field_validator("gpu_model", check_fields=False)
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v not in GPU_MODELS:
            raise ValueError(f"unknown GPU model {v!r}; allowed: {', '.join(GPU_MODELS)}")
        return v
