"""Extended-resource names: the one place a partition or GPU share becomes a resource string.

The SR-IOV device plugin, the NetworkAttachmentDefinition annotation, the ResourceQuota and the
verification Jobs all call these functions, so a team's partition has exactly one spelling.
"""

from __future__ import annotations

from typing import Final, Literal

from components.model.types import FULL_MEMBER_BIT

GPU: Final = "nvidia.com/gpu"
#: Time-sliced replicas are advertised under a separate name (``renameByDefault: true``) so that
#: quotas can tell a whole GPU from a share (NVIDIA/k8s-device-plugin README, "Shared Access").
GPU_SHARED: Final = "nvidia.com/gpu.shared"
SRIOV_PREFIX: Final = "nvidia.com"

#: HAMi's resources (node groups with ``hami``), renamed through its chart (``resourceName``,
#: ``resourceMem``, ``resourceMemPercentage``, ``resourceCores``, ``resourcePriority``: HAMi 2.10.0
#: values.yaml). HAMi's defaults are ``nvidia.com/gpu``, ``nvidia.com/gpumem``, ...: its slice would
#: then share the name of a whole GPU, and no quota, Kueue flavor or admission policy could tell a
#: tenth of a card from a card. ``vgpu`` is a slice (a physical GPU is advertised ``splitCount``
#: times), ``vgpu-memory`` its device memory in MiB, ``vgpu-cores`` its share of the SMs in percent.
HAMI_GPU: Final = "nvidia.com/vgpu"
HAMI_MEMORY: Final = "nvidia.com/vgpu-memory"
HAMI_MEMORY_PERCENTAGE: Final = "nvidia.com/vgpu-memory-percentage"
HAMI_CORES: Final = "nvidia.com/vgpu-cores"
HAMI_PRIORITY: Final = "nvidia.com/vgpu-priority"
#: Every HAMi resource name, the ones pods may ask for and the ones they may not.
HAMI_RESOURCES: Final = (HAMI_GPU, HAMI_MEMORY, HAMI_MEMORY_PERCENTAGE, HAMI_CORES, HAMI_PRIORITY)

MigStrategy = Literal["single", "mixed"]

#: Label on every object gpuaas creates (app.kubernetes.io recommended labels).
PART_OF: Final = {"app.kubernetes.io/part-of": "gpuaas"}


def pod_security_labels(level: Literal["privileged", "baseline", "restricted"]) -> dict[str, str]:
    """Pod Security Admission labels for ``level``; ``audit``/``warn`` match ``enforce`` so the API
    server neither warns on every rollout nor audits what it already enforces."""
    return {f"pod-security.kubernetes.io/{mode}": level for mode in ("enforce", "audit", "warn")}


def mig_resource(profile: str) -> str:
    """Resource of one MIG profile under the ``mixed`` strategy, e.g. ``nvidia.com/mig-1g.10gb``."""
    return f"nvidia.com/mig-{profile}"


def sriov_resource_name(pkey: int) -> str:
    """Device-plugin ``resourceName`` of a partition's VF pool, e.g. ``sriov8001`` for 0x0001."""
    return f"sriov{pkey | FULL_MEMBER_BIT:04x}"


def sriov_resource(pkey: int) -> str:
    """Full extended-resource name, e.g. ``nvidia.com/sriov8001``."""
    return f"{SRIOV_PREFIX}/{sriov_resource_name(pkey)}"


def rdma_shared_resource(prefix: str, name: str) -> str:
    """The RDMA shared device plugin's resource, e.g. ``rdma/hca_shared_devices_a``."""
    return f"{prefix}/{name}"


#: Label on every object of one team (its namespace first): the admission policies' namespaceSelector
#: and the plan index read it.
TEAM_LABEL: Final = "gpuaas.io/team"

#: Node label naming the node group (on-prem) or GPU pool (AKS) a node belongs to.
NODE_GROUP_LABEL: Final = "gpuaas.io/node-group"
#: The mig-parted config the GPU Operator's mig-manager applies to a node
#: (NVIDIA GPU Operator docs, "GPU Operator with MIG").
MIG_CONFIG_LABEL: Final = "nvidia.com/mig.config"
#: The device-plugin config key of a node (NVIDIA/k8s-device-plugin README, "Multiple configs").
DEVICE_PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
#: On the nodes of HAMi node groups (``"true"``): HAMi's device plugin runs where it is set. On
#: namespaces, the teams with HAMi quota: HAMi's webhook sees only those.
HAMI_LABEL: Final = "gpuaas.io/hami"
#: HAMi's own node label (its docs: ``kubectl label nodes <node> gpu=on``; the chart's default
#: ``devicePlugin.nvidiaNodeSelector``), which Helm keeps in the selector whatever else it is given.
HAMI_CHART_NODE_LABEL: Final = "gpu"
#: The labels of every node of a HAMi group, and the selector of HAMi's device plugin: both, so a
#: node some other tool labelled ``gpu=on`` does not get HAMi's device plugin beside NVIDIA's.
HAMI_NODE_LABELS: Final = {HAMI_CHART_NODE_LABEL: "on", HAMI_LABEL: "true"}
#: The GPU Operator deploys an operand on a node unless the node says ``false`` here, and keeps a
#: ``false`` already set (gpu-operator controllers/state_manager.go ``addGPUStateLabels``): HAMi's
#: nodes turn NVIDIA's device plugin and MIG Manager off this way, as HAMi documents.
GPU_DEPLOY_DEVICE_PLUGIN_LABEL: Final = "nvidia.com/gpu.deploy.device-plugin"
GPU_DEPLOY_MIG_MANAGER_LABEL: Final = "nvidia.com/gpu.deploy.mig-manager"
#: The GPU Operator's validator (its DaemonSet's nodeSelector, gpu-operator v26.7.0
#: assets/state-operator-validation/0500_daemonset.yaml): off on HAMi nodes, whose device plugin it
#: cannot validate (:func:`components.operators.hami.node_validation_daemonset` says why).
GPU_DEPLOY_OPERATOR_VALIDATOR_LABEL: Final = "nvidia.com/gpu.deploy.operator-validator"
#: AKS puts this label on every node of an agent pool (AKS docs, "Use labels in an AKS cluster").
AKS_POOL_LABEL: Final = "kubernetes.azure.com/agentpool"
#: Every label gpuaas owns on a GPU node; ``gpuPools[].labels`` may not set them.
OWNED_NODE_LABELS: Final = frozenset(
    {
        NODE_GROUP_LABEL,
        MIG_CONFIG_LABEL,
        DEVICE_PLUGIN_CONFIG_LABEL,
        HAMI_LABEL,
        HAMI_CHART_NODE_LABEL,
        GPU_DEPLOY_DEVICE_PLUGIN_LABEL,
        GPU_DEPLOY_MIG_MANAGER_LABEL,
        GPU_DEPLOY_OPERATOR_VALIDATOR_LABEL,
    }
)
#: The label NFD puts on Mellanox nodes (network-operator v26.4.1 templates/nodefeaturerules.yaml),
#: which the DOCA driver DaemonSet requires (manifests/state-ofed-driver/0050_ofed-driver-ds.yaml).
MELLANOX_LABEL: Final = "feature.node.kubernetes.io/pci-15b3.present"

# --------------------------------------------------------------------------------------------
# Names the program owns, which the rules keep free for it

#: Namespace of the per-pool proofs (AKS, ``verification.aksPools``): pools have no team namespace.
POOL_NAMESPACE: Final = "gpuaas-verify"
#: The network name of gpuaas's Multus conf (:mod:`components.fabric.multus`); any other name is the primary CNI's.
MULTUS_NETWORK: Final = "multus-cni-network"
