"""What an AKS stack config says of its ND InfiniBand pools, beyond their own settings: the labels of their
nodes, the cluster autoscaler's node template of an empty pool, and the capacity rows of the plan summary.

Pure, read from the whole :class:`StackConfig` (a pool's labels and offered resources follow from the GPU
Operator's sharing and the RDMA plugin's settings too): :mod:`components.platform_args` hands the results
to :class:`components.clusters.aks.AksNdPool` as plain values, so the component reads no stack config.
"""

from __future__ import annotations

from typing import Any, Final

from components.clusters.onprem_nodes import pool_labels
from components.model import hami
from components.model.capacity import group_capacity
from components.model.catalog import ND_SKUS
from components.model.config import StackConfig
from components.model.platform import AksPlatform, GpuPool


def aks_platform(cfg: StackConfig) -> AksPlatform:
    """``cfg.platform`` of an AKS stack; the AKS functions are never called for on-prem."""
    if cfg.aks is None:
        raise ValueError(f"platform kind is {cfg.platform.kind!r}; AKS settings need kind aks")
    return cfg.aks


def node_labels(cfg: StackConfig, pool: GpuPool) -> dict[str, str]:
    """Kubernetes labels of a GPU pool's nodes: the user's labels, then gpuaas's over them.

    gpuaas's labels (:func:`components.clusters.onprem_nodes.pool_labels`: node group, MIG config,
    device-plugin config) are the same on-prem nodes get by NodePatch. On AKS they sit on the
    pool because AKS puts pool labels on every node it adds, autoscaled ones included. MIG is the
    GPU Operator's mig-manager, not AKS-managed MIG (``gpu_instance_profile``), which needs the
    AKS driver that ``driver=None`` skips (azure-aks-docs gpu-multi-instance.md). Rules refuse
    user labels with gpuaas's keys, so the merge order only matters as a safety net.
    """
    return {**pool.labels, **pool_labels(cfg, pool)}


#: VMSS tag prefix the cluster autoscaler reads for an empty scale set's template node
#: (kubernetes/autoscaler cluster-autoscaler/cloudprovider/azure/README.md, "Resources";
#: azure_template.go ``nodeResourcesTagName``). Azure tag names cannot hold ``/``, so the
#: autoscaler turns every ``_`` (and ``~2``) after the prefix into ``/``
#: (``extractAllocatableResourcesFromScaleSet``): a resource name with ``_`` cannot be written.
NODE_TEMPLATE_RESOURCES_TAG: Final = "k8s.io_cluster-autoscaler_node-template_resources_"


def node_resources(cfg: StackConfig, pool: GpuPool) -> dict[str, int]:
    """Extended resources one node of ``pool`` offers once its operators run, by name.

    GPUs as the pool's sharing makes them (whole, MIG instances, time-sliced shares or HAMi slices; the same
    arithmetic as the quota check, :func:`components.model.capacity.group_capacity`, per node), and the
    RDMA shared device's ``rdmaHcaMax`` slots when the plugin runs.
    """
    per_pool = group_capacity(cfg, pool.name, pool, pool.gpu_model)
    # HAMi's memory and cores are booked by its scheduler extender, never advertised by a node.
    out = {name: n // pool.max_count for name, n in per_pool.items() if name not in hami.PER_SLICE}
    if cfg.network.rdma_shared_device_plugin != "none":
        prefix, name = cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name
        out[f"{prefix}/{name}"] = cfg.network.rdma_hca_max
    return dict(sorted(out.items()))


def autoscaler_tags(cfg: StackConfig, pool: GpuPool) -> dict[str, str]:
    """Node-template tags so the cluster autoscaler scales an empty pool up for GPU/RDMA pods.

    With no node in the pool the autoscaler builds a template node from the VM size and the
    scale set's tags; it knows the SKU's ``nvidia.com/gpu`` count but not what the device
    plugins will advertise (``rdma/<name>``, MIG instances, shares), so a pod asking for those
    never fits the template and the pool stays at zero (Azure/AKS#2832 is the same for GPUs).
    AgentPool tags are put on the pool's VMSS; with ``existingCluster`` gpuaas creates no pool, so
    add them yourself (``az aks nodepool update --tags``). A resource whose name has ``_`` is left out: it
    cannot be written (see :data:`NODE_TEMPLATE_RESOURCES_TAG`); rules refuse it for pools that
    scale from zero.
    """
    return {
        NODE_TEMPLATE_RESOURCES_TAG + name.replace("/", "_"): str(n)
        for name, n in node_resources(cfg, pool).items()
        if "_" not in name
    }


def pool_capacity(cfg: StackConfig) -> list[dict[str, Any]]:
    """Per GPU pool, what it adds at ``maxCount`` — the rows of the plan summary's pool table.

    Same arithmetic as :func:`components.model.capacity.capacity` (catalog GPUs per VM × maxCount).
    ``[]`` on-prem. Assumes the config passed :func:`components.rules.check`.
    """
    aks = cfg.aks
    if aks is None:
        return []
    rows: list[dict[str, Any]] = []
    for pool in aks.gpu_pools:
        sku = ND_SKUS[pool.vm_size]
        rows.append(
            {
                "pool": pool.name,
                "vm_size": pool.vm_size,
                "gpu_model": sku.gpu_model,
                "gpus_per_vm": sku.gpus,
                "max_nodes": pool.max_count,
                "max_gpus": sku.gpus * pool.max_count,
                "ib_gbps_per_gpu": sku.ib_gbps_per_gpu,
            }
        )
    return rows
