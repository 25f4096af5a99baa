"""The GPUCluster CR of the DRA resource model (``gpuOperator.resourceModel: dra``).

Why DRA and what it needs are in :mod:`components.model.dra`'s docstring; the chart values that
leave the ClusterPolicy out are :func:`components.operators.gpu_operator.dra_values`.
"""

from __future__ import annotations

from typing import Any, Final

from components.k8s import Manifest
from components.model.resources import PART_OF
from components.model.versions import Versions

#: The GPUCluster is a singleton: "metadata.name must be 'gpu-cluster'" (its CRD's CEL rule).
GPU_CLUSTER: Final = "gpu-cluster"
DRA_DRIVER_IMAGE: Final = "dra-driver-nvidia-gpu"


def gpu_cluster(
    versions: Versions, dynamic_mig: bool, driver_enabled: bool, dcgm_exporter: dict[str, Any] | None = None
) -> Manifest:
    """The GPUCluster CR (gpu-operator v26.7.0 api/nvidia/v1alpha1; CRD nvidia.com_gpuclusters.yaml).

    - ``draDriver``: the pinned driver image; ``computeDomains.enabled: false`` — gpuaas gives
      teams no ComputeDomain (multi-node NVLink) claims, so its controller is not run;
      ``featureGates.DynamicMIG`` with ``gpuOperator.dra.dynamicMig`` (alpha).
    - ``hostPaths.driverInstallDir``: ``/`` for a host-installed driver, ``/run/nvidia/driver``
      where the operator's NVIDIADriver installs it (the CR sample's and chart's default).
    - ``daemonsets``: node-critical, and tolerating the ``nvidia.com/gpu`` taint of GPU pools.
    """
    v = versions
    dra_driver: dict[str, Any] = {
        "repository": v.dra_driver_repository,
        "image": DRA_DRIVER_IMAGE,
        "version": v.dra_driver,
        "computeDomains": {"enabled": False},
    }
    if dynamic_mig:
        # Rendered as FEATURE_GATES on the driver's containers (GPUCluster CRD draDriver.featureGates).
        dra_driver["featureGates"] = {"DynamicMIG": True}
    spec: dict[str, Any] = {
        "draDriver": dra_driver,
        "hostPaths": {"driverInstallDir": "/run/nvidia/driver" if driver_enabled else "/"},
        "daemonsets": {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    if dcgm_exporter:
        # observability: the counters list by name and the ServiceMonitor (GPUCluster CRD dcgmExporter).
        spec["dcgmExporter"] = {**dcgm_exporter, "config": {"name": dcgm_exporter["config"]["name"]}}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": GPU_CLUSTER, "labels": dict(PART_OF)},
        "spec": spec,
    }
