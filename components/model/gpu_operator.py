"""``gpuaas:gpuOperator``: the NVIDIA GPU Operator and the GPU resource model (device plugin or DRA)."""

from __future__ import annotations

from typing import Literal

from components.model.base import Model
from components.model.types import (
    DnsLabel,
    GoDurationSeconds,
)


class DraOptions(Model):
    """Options of the DRA resource model (``gpuOperator.resourceModel: dra``)."""

    dynamic_mig: bool = False
    """Alpha: the DRA driver creates MIG partitions on demand (its ``DynamicMIG`` feature gate,
    driver v0.3+) instead of the node groups' static layouts, which must then be left out
    ("MIG partitions the driver did not create are destroyed", dra-driver-nvidia-gpu MIG guide)."""
    partitionable_devices_enabled: bool = False
    """With ``dynamicMig`` on Kubernetes 1.34–1.35: the cluster's kube-apiserver and kube-scheduler
    run with the ``DRAPartitionableDevices`` feature gate (alpha; on by default from 1.36)."""
    cdi_enabled: bool = False
    """The nodes' container runtime has the Container Device Interface on, which the NVIDIA DRA driver
    hands devices to containers through: containerd 2.0 and CRI-O by default, containerd 1.7 with
    ``enable_cdi = true`` in its CRI plugin. A GPUCluster deploys no container toolkit to turn it
    on, and nothing in the config shows it, so an on-prem DRA stack says so here once checked
    (AKS pools on ``Ubuntu2404`` run containerd 2.0 and need no word; see components/rules/dra.py)."""


class GpuOperator(Model):
    """NVIDIA GPU Operator."""

    namespace: DnsLabel = "gpu-operator"
    """Namespace of the GPU Operator release (default ``gpu-operator``)."""
    mig_strategy: Literal["single", "mixed"] = "mixed"
    """The GPU Operator's MIG strategy (chart ``mig.strategy``): ``mixed`` (default) advertises each MIG profile as
    its own resource (``nvidia.com/mig-<profile>``), ``single`` advertises MIG instances as ``nvidia.com/gpu`` and
    allows one profile per node and no per-profile quotas. Not ``single`` under DRA."""
    gpudirect: Literal["dmabuf", "peermem"] = "dmabuf"
    """``dmabuf`` (open kernel modules, NVIDIA's recommendation) or legacy ``peermem``."""
    driver_enabled: bool | None = None
    """``None``: derived per platform (host driver on-prem, operator driver on AKS)."""
    helm_timeout_seconds: GoDurationSeconds = 1800
    """Seconds ``pulumi up`` waits for the GPU Operator Helm release to become ready (default 1800: driver
    containers compile kernel modules on first start)."""
    resource_model: Literal["devicePlugin", "dra"] = "devicePlugin"
    """How pods get GPUs: ``devicePlugin`` (ClusterPolicy; ``nvidia.com/gpu`` extended resources)
    or ``dra`` (GPUCluster; ResourceClaims through the NVIDIA DRA driver, Kubernetes 1.34+).
    A running stack does not switch: GPUCluster is greenfield only (see components/model/dra.py)."""
    dra: DraOptions = DraOptions()
    """Options of the DRA resource model; read only with ``resourceModel: dra``."""
